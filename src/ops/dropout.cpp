// Inverted dropout with a mask that depends only on one RNG draw and the element index, alone and
// fused with the residual sum that follows it in every transformer sublayer.
#include <algorithm>

#include "backend/kernels.h"
#include "backend/matmul.h"
#include "ops/dropout_mask.h"
#include "ops/ops.h"

namespace hnas::ops {

namespace {

// The forward passes run over blocks of kBlock elements: first each element's factor (dropout_mask.h),
// then the outputs and the mask, one byte per element (a quarter of an f32 mask's traffic). In one loop, the hash's 64-bit lanes and
// the mask's bytes left GCC's vectorizer without a vector width that fits both; and the bodies capture
// their pointers by value, since bytes may alias a captured pointer that the loop would then reload.
constexpr int64_t kBlock = 256;

// body(begin, count, factor) for every block of n elements, in parallel.
template <typename Body>
void for_each_block(int64_t n, const KeepFactors& factors, Body body) {
    const int64_t blocks = (n + kBlock - 1) / kBlock;
#pragma omp parallel for schedule(static) if (n >= kernels::kParallelGrain)
    for (int64_t b = 0; b < blocks; ++b) {
        const int64_t begin = b * kBlock, count = std::min(kBlock, n - begin);
        alignas(64) float factor[kBlock];
        factors.fill(begin, count, factor);
        body(begin, count, factor);
    }
}

// The dropped input's gradient, dy ⊙ mask · 1/(1−p): the scaled mask is the derivative. With
// FeedsProducts::yes (a residual branch's gradient, which its linear layer's backward products read),
// its bf16 copy is written in the same pass under bf16.
void add_masked_gradient(const Tensor& dy, const Tensor& mask, float keep_scale, GradSink& sink, size_t input,
                         FeedsProducts feeds) {
    const GradSink::Target target = sink.target(input);
    Tensor& dx = target.grad;
    const bool accumulate = target.accumulate;
    const float* g = dy.data();
    const uint8_t* m = mask.bytes();
    float* d = dx.data();
    uint16_t* rounded = feeds == FeedsProducts::yes ? backend::operand_copy_to_fill(dx) : nullptr;
    const int64_t n = dx.numel();
    if (rounded == nullptr) {
#pragma omp parallel for simd schedule(static) if (n >= kernels::kParallelGrain)
        for (int64_t i = 0; i < n; ++i) write_gradient(d[i], g[i] * (static_cast<float>(m[i]) * keep_scale), accumulate);
    } else {
#pragma omp parallel for simd schedule(static) if (n >= kernels::kParallelGrain)
        for (int64_t i = 0; i < n; ++i) {
            write_gradient(d[i], g[i] * (static_cast<float>(m[i]) * keep_scale), accumulate);
            rounded[i] = kernels::round_to_bf16(d[i]);
        }
    }
}

}  // namespace

Var dropout(const Var& x, float p, Rng& rng, ResultReaders readers) {
    check_dropout_probability("dropout", p);
    if (p == 0.0f) return x;
    const KeepFactors factors = KeepFactors::draw(p, rng);
    Tensor mask = Tensor::empty(x.shape(), DType::u8);
    const float* in = x.value().data();
    uint8_t* m = mask.bytes();
    // Dropouts here feed products (attention weights the context, post-norm embeddings the first
    // projections, the feed-forward activation its second layer), so under bf16 the copy is written
    // here, alone when only products read the result; a pre-norm model's embedding dropout feeds a
    // layer norm and leaves its copy unread.
    const bool bf16_only =
        readers == ResultReaders::products && backend::matmul_precision() == backend::MatmulPrecision::bf16;
    Tensor y = bf16_only ? Tensor::bf16_only(x.shape()) : Tensor::empty(x.shape());
    float* out = bf16_only ? nullptr : y.data();
    uint16_t* rounded = bf16_only ? y.bf16_copy().first : backend::operand_copy_to_fill(y);
    for_each_block(x.numel(), factors, [=](int64_t begin, int64_t count, const float* factor) {
        const float* block_in = in + begin;
        uint8_t* block_mask = m + begin;
        if (out == nullptr) {
            uint16_t* block_rounded = rounded + begin;
#pragma omp simd
            for (int64_t j = 0; j < count; ++j) {
                block_mask[j] = factor[j] != 0.0f;
                block_rounded[j] = kernels::round_to_bf16(block_in[j] * factor[j]);
            }
            return;
        }
        float* block_out = out + begin;
#pragma omp simd
        for (int64_t j = 0; j < count; ++j) {
            block_mask[j] = factor[j] != 0.0f;
            block_out[j] = block_in[j] * factor[j];
        }
        kernels::round_row_to_bf16(block_out, rounded == nullptr ? nullptr : rounded + begin, count);
    });
    return make_result("dropout", y, {x}, [mask, factors](const Tensor& dy, GradSink& sink) {
        add_masked_gradient(dy, mask, factors.keep_scale, sink, 0, FeedsProducts::no);
    });
}

// add(residual, dropout(branch, p, rng)) in one pass over the three arrays instead of two passes over
// five; the same mask, since it draws the same key (the sum may round once instead of twice: FMA).
Var dropout_add(const Var& residual, const Var& branch, float p, Rng& rng) {
    check_dropout_probability("dropout_add", p);
    HNAS_CHECK(residual.shape() == branch.shape(), "dropout_add: residual ", shape_str(residual.shape()), " and branch ",
               shape_str(branch.shape()), " differ");
    if (p == 0.0f) return add(residual, branch);
    const KeepFactors factors = KeepFactors::draw(p, rng);
    Tensor mask = Tensor::empty(branch.shape(), DType::u8);
    Tensor y = Tensor::empty(branch.shape());
    const float *in = branch.value().data(), *skip = residual.value().data();
    uint8_t* m = mask.bytes();
    float* out = y.data();
    for_each_block(branch.numel(), factors, [=](int64_t begin, int64_t count, const float* factor) {
        const float *block_in = in + begin, *block_skip = skip + begin;
        float* block_out = out + begin;
        uint8_t* block_mask = m + begin;
#pragma omp simd
        for (int64_t j = 0; j < count; ++j) {
            block_mask[j] = factor[j] != 0.0f;
            block_out[j] = block_skip[j] + block_in[j] * factor[j];
        }
    });
    return make_result("dropout_add", y, {residual, branch}, [mask, factors](const Tensor& dy, GradSink& sink) {
        sink.add(0, dy);
        if (sink.wants(1)) add_masked_gradient(dy, mask, factors.keep_scale, sink, 1, FeedsProducts::yes);
    });
}

}  // namespace hnas::ops
