// The process-wide matmul precision and what the ops that feed products ask of it; the products
// themselves, and whether this CPU has bf16 ones, are matmul.cpp's.
#include <atomic>

#include "backend/matmul.h"

namespace hnas::backend {

namespace {
std::atomic<MatmulPrecision> precision{MatmulPrecision::f32};
}  // namespace

void set_matmul_precision(MatmulPrecision value) {
    HNAS_CHECK(value != MatmulPrecision::bf16 || bf16_matmul_available(),
               "precision bf16: oneDNN has no bf16 matmul on this CPU (it needs AVX-512 BF16 or AMX); use precision f32");
    precision.store(value);
}

MatmulPrecision matmul_precision() { return precision.load(); }

uint16_t* operand_copy_to_fill(Tensor& tensor) {
    return matmul_precision() == MatmulPrecision::bf16 ? tensor.bf16_copy().first : nullptr;
}

}  // namespace hnas::backend
