// The matrix-multiply backend: the only part of hnas that talks to oneDNN.
// C[b] = alpha · op(A[b]) · op(B[b]) (+ bias) (+ C[b] when accumulating), row-major f32, where op
// transposes when asked. Transposes are folded into the memory descriptors' strides, never copied.
// Each distinct problem creates its oneDNN primitive once and reuses it from a cache.
// The precision setting chooses f32 products or bf16 ones (operands rounded to bf16, products
// accumulated, biased and written in f32); callers pass f32 arrays, with their bf16 roundings when
// they have them, and receive f32 arrays, or under bf16 the result's bf16 rounding alone when only
// products read it.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "base/enum_names.h"
#include "tensor/tensor.h"

namespace hnas::backend {

struct MatmulShape {
    int64_t batch = 1;   // number of independent products
    int64_t m = 0;       // rows of op(A) and C
    int64_t n = 0;       // columns of op(B) and C
    int64_t k = 0;       // the contracted dimension
    bool trans_a = false;  // A is stored (k, m) instead of (m, k)
    bool trans_b = false;  // B is stored (n, k) instead of (k, n)
    bool shared_b = false;  // one B for every batch entry (weights), instead of one per entry
    // Attention heads: the batch entries are (batch / heads, heads) pairs, and an interleaved operand
    // keeps its heads side by side within each stored row, (batch / heads, rows, heads, cols) as a
    // projection (B, T, H·K) holds them, instead of (batch / heads, heads, rows, cols): products read
    // and write heads where they are, without split or merge copies.
    int64_t heads = 1;
    bool a_interleaved = false, b_interleaved = false, c_interleaved = false;

    double flops() const {  // 2·batch·m·n·k: a multiply and an add per term
        return 2.0 * static_cast<double>(batch) * static_cast<double>(m) * static_cast<double>(n) * static_cast<double>(k);
    }
};

// A function applied to each entry of C in the product's epilogue, after the bias, while the block is
// still in cache (oneDNN's eltwise post-op): GELU exact (erf) or its tanh approximation.
enum class MatmulEpilogue { none, gelu_erf, gelu_tanh };

struct MatmulOptions {
    float alpha = 1.0f;           // must stay 1 when a bias is given
    const float* bias = nullptr;  // length n, added to every row of C
    bool accumulate = false;      // C += result instead of C = result
    MatmulEpilogue epilogue = MatmulEpilogue::none;  // needs alpha 1 and no accumulation
};

// An operand of a product: its f32 values and, when already made, the same values rounded to bf16,
// which a bf16 product reads instead of converting them again (then the f32 values may be null); or
// (packed_operand) a matrix whose tensor keeps it in the layout the product's kernel reads.
struct MatmulOperand {
    MatmulOperand(const float* values) : f32(values) {}  // implicit: any f32 array is an operand
    MatmulOperand(const float* values, const uint16_t* rounded) : f32(values), bf16(rounded) {}
    MatmulOperand plus(int64_t elements) const {
        return {f32 ? f32 + elements : nullptr, bf16 ? bf16 + elements : nullptr};
    }
    const float* f32;
    const uint16_t* bf16 = nullptr;
    const Tensor* packable = nullptr;  // packed_operand's tensor, which must outlive the product
};

// Where a product writes C: its f32 values, or, under bf16 precision for a result only products read,
// only their rounding to bf16 (nearest even, as convert_to_bf16; oneDNN rounds the f32 sum it has
// biased), which saves writing the f32 values and converting them.
struct MatmulResult {
    MatmulResult(float* values) : f32(values) {}  // implicit: any f32 array is a result
    static MatmulResult bf16_only(uint16_t* rounded) {
        MatmulResult result(nullptr);
        result.bf16 = rounded;
        return result;
    }
    float* f32;
    uint16_t* bf16 = nullptr;
};

// A tensor as an operand: under bf16 precision with its bf16 copy (Tensor::bf16_copy), converted only
// when its values changed since a product last read it.
MatmulOperand operand(const Tensor& tensor);

// A matrix that products read as B many times while its values stay (a weight while decoding or
// evaluating): kept with its tensor (Tensor::layout_copy) in the blocked layout oneDNN's kernel reads,
// packed on first use and again only after its values change. A product of a plain B packs it on every
// call: f32 decoding's 8,000-word output projection ran at 132 GFLOP/s against 191 packed (AMD,
// docs/performance.md). B only, one matrix (batch 1, one head).
MatmulOperand packed_operand(const Tensor& matrix);

// For an op whose output (or input gradient) is a product's operand in the models here: under bf16
// precision, that tensor's bf16 copy, marked current, for the op to fill with round_to_bf16 of every
// value in the same pass as it writes them, so no product converts it again; under
// f32, null. Take the tensor's data() pointer first: data() marks the copy stale.
uint16_t* operand_copy_to_fill(Tensor& tensor);

void matmul(MatmulOperand a, MatmulOperand b, MatmulResult c, const MatmulShape& shape,
            const MatmulOptions& options = {});

// f32: exact f32 products (the default). bf16: A and B are rounded to bf16 (nearest even) before the
// product, which runs on the CPU's bf16 instructions (AMX / AVX512-BF16) with f32 accumulation; bias,
// alpha and accumulation into C stay f32. Process-wide, like the thread count; part of the cache key.
enum class MatmulPrecision { f32, bf16 };
inline constexpr EnumName<MatmulPrecision> kMatmulPrecisionNames[]{{MatmulPrecision::f32, "f32"}, {MatmulPrecision::bf16, "bf16"}};
constexpr const auto& enum_names(MatmulPrecision) { return kMatmulPrecisionNames; }
// Throws for bf16 on a CPU without a bf16 matmul (bf16_matmul_available), naming the CPU's lack.
void set_matmul_precision(MatmulPrecision precision);
// Whether oneDNN has a bf16 matmul on this CPU (AVX-512 BF16 or AMX; not AVX2 alone).
bool bf16_matmul_available();
MatmulPrecision matmul_precision();

// What the matmuls have cost since the process started: calls, their FLOPs (2·batch·m·n·k) and
// seconds (the whole call: primitive lookup, bf16 conversion, execution; and operand()'s conversions),
// and the primitives created (one per shape, again when the cache had forgotten it) with the seconds
// their creation took, and how many of them run oneDNN's reference kernel (orders of magnitude slower:
// a layout its generated kernels do not take). Tests and benchmarks use it to prove that the hot path
// reuses primitives and never falls to the reference kernel; the trainer's profile records, to show
// what varying shapes cost.
struct MatmulStats {
    int64_t calls = 0, primitives = 0, reference_primitives = 0;
    double flops = 0.0, seconds = 0.0, creation_seconds = 0.0;
};
MatmulStats matmul_stats();

// One product as matmul() was asked for it: what the matmul-only bound replays (docs/performance.md).
struct MatmulCall {
    MatmulShape shape;
    float alpha = 1.0f;
    bool bias = false, accumulate = false;
    MatmulPrecision precision = MatmulPrecision::f32;
    bool bf16_result = false;  // C written as bf16 alone (MatmulResult::bf16_only)
    MatmulEpilogue epilogue = MatmulEpilogue::none;
    bool b_packed = false;  // B in the kernel's own layout (packed_operand)
};

// Records every product matmul() runs, on any thread, while it lives; one recorder at a time.
class MatmulRecorder {
public:
    MatmulRecorder();
    ~MatmulRecorder();
    MatmulRecorder(const MatmulRecorder&) = delete;
    MatmulRecorder& operator=(const MatmulRecorder&) = delete;
    std::vector<MatmulCall> calls() const;
};

// The matmul-only bound of a list of products: each run alone by its oneDNN primitive on operands
// already in its precision (no conversion, no lookup), timed `repeats` times after one untimed run;
// the sum over the calls of each one's median seconds. With evict_bytes > 0, a buffer of that size is
// written before each timed run, so the operands come from beyond any cache smaller than it, as a
// step's do once its tensors outgrow the caches; with 0 they stay in cache from the run before.
double matmul_only_seconds(const std::vector<MatmulCall>& calls, int repeats, size_t evict_bytes);

// The matmul primitives kept, those of the most recently used shapes (matmul.cpp says why).
inline constexpr size_t kMatmulCacheCapacity = 1024;

// Threads used by oneDNN and by hnas's own OpenMP loops (one shared OpenMP pool).
void set_num_threads(int threads);
int num_threads();

// How idle OpenMP threads wait, chosen once at the start of main: unless OMP_WAIT_POLICY or
// GOMP_SPINCOUNT is set, re-executes the program (argv) with OMP_WAIT_POLICY=PASSIVE and
// GOMP_SPINCOUNT=kOpenmpSpinCount, since libgomp reads them when it loads, before main. A short spin
// before sleeping, measured in docs/performance.md ("How OpenMP threads wait"): sleeping at once made
// each parallel region wait for a woken thread (a real gigaword run 10 % slower); spinning long made a
// thread spin while its partner was descheduled by another process (1.6x slower under one busy core).
inline constexpr int kOpenmpSpinCount = 3000;
void choose_openmp_waiting(char** argv);

// "oneDNN 2.6.3 (cpu runtime OpenMP, 2 threads, OMP_WAIT_POLICY=PASSIVE, GOMP_SPINCOUNT=3000)": for
// --version and logs.
std::string describe();

}  // namespace hnas::backend
