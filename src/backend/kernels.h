// hnas's own elementwise loops, shared by every op: numpy-style broadcasting of a binary function
// and its adjoint, the sum of a broadcast gradient back to an input's shape. Plain OpenMP loops over
// contiguous memory; OpenMP is the same pool oneDNN runs on, so the two never oversubscribe the cores.
#pragma once

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>
#include <span>
#include <vector>

#include "tensor/tensor.h"

namespace hnas::kernels {

// exp(x) for the hot loops of the attention normalizations: written so the compiler vectorizes loops
// that call it (std::exp does not), exact 0 below the float range (masked entries hold -inf), and
// within 2 ulp elsewhere: exp(x) = 2^n · exp(r) with r = x − n·ln 2 in [−ln2/2, ln2/2] and a
// degree-6 Taylor polynomial for exp(r) (truncation error < 1.3e-7 relative). n is rounded by adding
// and subtracting 1.5·2^23 (exact for |n| < 2^22 in the default rounding mode) rather than with
// std::floor: GCC will not vectorize a floor call once it predicates the computation on x ≥ −87.
inline float fast_exp(float x) {
    const float clamped = std::min(x, 88.0f);
    const float n = (clamped * 1.44269504f + 12582912.0f) - 12582912.0f;
    const float r = (clamped - n * 0.693359375f) + n * 2.12194440e-4f;  // two-part ln 2 keeps r exact
    const float p = 1.0f + r * (1.0f + r * (0.5f + r * (1.0f / 6 + r * (1.0f / 24 + r * (1.0f / 120 + r * (1.0f / 720))))));
    const float scale = std::bit_cast<float>((static_cast<int32_t>(std::max(n, -126.0f)) + 127) << 23);
    return x < -87.0f ? 0.0f : p * scale;
}

// exp(x) in double, for sums that must keep double's precision (beam search's log-softmax), written to
// vectorize like fast_exp: 2^n · exp(r), r = x − n·ln 2 with fdlibm's two-part ln 2, and a degree-13
// Taylor polynomial for exp(r) (truncation below 5e-18 relative). Within 2 ulp of libm's exp; exact 0
// below −708, where exp leaves the normal doubles. n is rounded by adding 1.5·2^52, and 2^n is built
// from the bits of that sum, so no conversion to an integer is needed.
inline double exp_double(double x) {
    constexpr double kRound = 6755399441055744.0;  // 1.5·2^52
    const double clamped = std::min(std::max(x, -708.0), 709.0);
    const double shifted = clamped * 1.4426950408889634 + kRound;
    const double n = shifted - kRound;
    const double r = (clamped - n * 6.93147180369123816490e-01) - n * 1.90821492927058770002e-10;
    double p = 1.0 / 6227020800.0;  // 1/13!
    for (const double inverse_factorial : {1.0 / 479001600.0, 1.0 / 39916800.0, 1.0 / 3628800.0, 1.0 / 362880.0,
                                           1.0 / 40320.0, 1.0 / 5040.0, 1.0 / 720.0, 1.0 / 120.0, 1.0 / 24.0,
                                           1.0 / 6.0, 0.5, 1.0, 1.0}) {
        p = p * r + inverse_factorial;
    }
    const int64_t exponent = std::bit_cast<int64_t>(shifted) - std::bit_cast<int64_t>(kRound);
    const double scale = std::bit_cast<double>((exponent + 1023) << 52);
    return x < -708.0 ? 0.0 : p * scale;
}

// erf(x), vectorizable like fast_exp (std::erf is a libm call per element; GELU spent 17 % of a
// training step in it): Abramowitz & Stegun 7.1.26, erf(|x|) = 1 − t·(a1 + t·(a2 + … + t·a5))·e^(−x²)
// with t = 1/(1 + p·|x|): absolute error below 1.5e-7 in exact arithmetic, 5.3e-7 measured in float
// (tests/backend/test_backend.cpp), far inside the 2e-5 of the PyTorch parity fixtures.
// fast_erf_with_gaussian also returns the e^(−x²) it is built from, for GELU's derivative, whose
// normal density φ(x) ∝ e^(−x²/2) is then one exp fewer per element.
struct ErfWithGaussian {
    float erf, gaussian;  // erf(x), e^(−x²)
};
inline ErfWithGaussian fast_erf_with_gaussian(float x) {
    const float a = std::abs(x);
    const float t = 1.0f / (1.0f + 0.3275911f * a);
    const float poly = t * (0.254829592f + t * (-0.284496736f + t * (1.421413741f + t * (-1.453152027f + t * 1.061405429f))));
    const float gaussian = fast_exp(-a * a);
    const float magnitude = 1.0f - poly * gaussian;
    return {x < 0.0f ? -magnitude : magnitude, gaussian};
}
inline float fast_erf(float x) { return fast_erf_with_gaussian(x).erf; }

// GELU and its derivative, for the ops that apply it alone (ops::gelu) or fused (ops::linear_gelu).
// Exact form: gelu(x) = x·Φ(x), gelu'(x) = Φ(x) + x·φ(x), with Φ(x) = (1 + erf(x/√2))/2 and
// φ(x) = e^(−(x/√2)²)/√(2π), erf's own exponential.
// The _with_derivative forms give both from one erf (or tanh): a forward that keeps gelu'(x) for its
// backward instead of x (ops::linear_gelu) spares the backward its own.
struct GeluWithDerivative {
    float value, derivative;
};
inline constexpr float kInvSqrt2 = 0.70710678118654752f, kInvSqrt2Pi = 0.39894228040143268f;
inline GeluWithDerivative gelu_erf_with_derivative(float x) {
    const ErfWithGaussian e = fast_erf_with_gaussian(x * kInvSqrt2);
    const float cdf = 0.5f * (1.0f + e.erf);
    return {x * cdf, cdf + x * kInvSqrt2Pi * e.gaussian};
}
inline float gelu_erf(float x) { return gelu_erf_with_derivative(x).value; }
inline float gelu_erf_derivative(float x) { return gelu_erf_with_derivative(x).derivative; }
// The tanh approximation: 0.5·x·(1 + tanh(√(2/π)·(x + 0.044715·x³))).
inline constexpr float kSqrt2OverPi = 0.79788456080286536f;
inline GeluWithDerivative gelu_tanh_with_derivative(float x) {
    const float t = std::tanh(kSqrt2OverPi * (x + 0.044715f * x * x * x));
    return {0.5f * x * (1.0f + t),
            0.5f * (1.0f + t) + 0.5f * x * (1.0f - t * t) * kSqrt2OverPi * (1.0f + 3.0f * 0.044715f * x * x)};
}
inline float gelu_tanh(float x) { return gelu_tanh_with_derivative(x).value; }
inline float gelu_tanh_derivative(float x) { return gelu_tanh_with_derivative(x).derivative; }

// The largest of n contiguous values (−∞ when n is 0), in vector lanes. Written without std::max,
// which returns a reference: GCC 12 then leaves the reduction scalar, one dependent compare per value
// (cross-entropy's forward pass over 8,000-wide rows ran 4× slower).
inline float max_value(const float* x, int64_t n) {
    float top = -std::numeric_limits<float>::infinity();
#pragma omp simd reduction(max : top)
    for (int64_t j = 0; j < n; ++j) top = top > x[j] ? top : x[j];
    return top;
}

// Loops smaller than this run on one thread: forking costs more than it saves.
constexpr int64_t kParallelGrain = 1 << 14;

// bf16 is the upper half of an f32 (sign, 8 exponent bits, 7 mantissa bits). Rounding to the nearest
// even upper half: add 0x7FFF plus the kept part's lowest bit, then truncate; a carry into the exponent
// gives the next binade or infinity, as it should. NaN is handled apart (the addition could turn a NaN
// payload into infinity) and stays a quiet NaN of the same sign. Branch-free, so conversion loops vectorize.
inline uint16_t round_to_bf16(float x) {
    const uint32_t bits = std::bit_cast<uint32_t>(x);
    const uint32_t rounded = (bits + 0x7FFFu + ((bits >> 16) & 1u)) >> 16;
    const uint32_t quiet_nan = (bits >> 16) | 0x40u;
    return static_cast<uint16_t>((bits & 0x7FFFFFFFu) > 0x7F800000u ? quiet_nan : rounded);
}

inline float bf16_to_float(uint16_t x) { return std::bit_cast<float>(static_cast<uint32_t>(x) << 16); }

// out[i] = round_to_bf16(x[i]) over n values.
void convert_to_bf16(const float* x, uint16_t* out, int64_t n);

// A broadcast walk over an output shape, with each operand's strides merged into as few axes as
// possible: the last axis is the inner loop, the others enumerate rows.
struct BroadcastPlan {
    std::vector<int64_t> dims;                    // merged output axes
    std::vector<std::vector<int64_t>> strides;    // per operand, per merged axis (0 where broadcast)
    int64_t rows() const;                         // product of all but the last merged axis
    int64_t row_length() const { return dims.back(); }
    // Element offset of each operand at the start of `row`.
    void row_offsets(int64_t row, int64_t* offsets) const;
};
BroadcastPlan plan_broadcast(const Shape& out_shape, const std::vector<Shape>& operand_shapes);

// out[i] = f(a[i'], b[i'']) over the broadcast of a's and b's shapes into out's shape.
template <typename F>
void broadcast_binary(const float* a, const Shape& a_shape, const float* b, const Shape& b_shape, float* out,
                      const Shape& out_shape, F f) {
    const BroadcastPlan plan = plan_broadcast(out_shape, {a_shape, b_shape});
    const int64_t rows = plan.rows(), length = plan.row_length();
    const int64_t stride_a = plan.strides[0].back(), stride_b = plan.strides[1].back();
#pragma omp parallel for schedule(static) if (rows * length >= kParallelGrain)
    for (int64_t row = 0; row < rows; ++row) {
        int64_t offsets[2];
        plan.row_offsets(row, offsets);
        const float* row_a = a + offsets[0];
        const float* row_b = b + offsets[1];
        float* row_out = out + row * length;
        if (stride_a == 1 && stride_b == 1) {
            for (int64_t i = 0; i < length; ++i) row_out[i] = f(row_a[i], row_b[i]);
        } else if (stride_a == 1 && stride_b == 0) {
            const float vb = row_b[0];
            for (int64_t i = 0; i < length; ++i) row_out[i] = f(row_a[i], vb);
        } else if (stride_a == 0 && stride_b == 1) {
            const float va = row_a[0];
            for (int64_t i = 0; i < length; ++i) row_out[i] = f(va, row_b[i]);
        } else {
            for (int64_t i = 0; i < length; ++i) row_out[i] = f(row_a[i * stride_a], row_b[i * stride_b]);
        }
    }
}

// out[i] = f(x[i]) elementwise over n values; with `rounded`, also rounded[i] = round_to_bf16(out[i])
// in the same pass (backend::operand_copy_to_fill).
template <typename F>
void map_unary(const float* x, float* out, int64_t n, F f, uint16_t* rounded = nullptr) {
    if (rounded == nullptr) {
#pragma omp parallel for simd schedule(static) if (n >= kParallelGrain)
        for (int64_t i = 0; i < n; ++i) out[i] = f(x[i]);
    } else {
#pragma omp parallel for simd schedule(static) if (n >= kParallelGrain)
        for (int64_t i = 0; i < n; ++i) {
            out[i] = f(x[i]);
            rounded[i] = round_to_bf16(out[i]);
        }
    }
}

// rounded[i] = round_to_bf16(f(x[i])) alone: a result only products read (ops::ResultReaders).
template <typename F>
void map_unary_to_bf16(const float* x, uint16_t* rounded, int64_t n, F f) {
#pragma omp parallel for simd schedule(static) if (n >= kParallelGrain)
    for (int64_t i = 0; i < n; ++i) rounded[i] = round_to_bf16(f(x[i]));
}

// A row just written, rounded to bf16 while it is still in cache (null `out`: nothing to round).
inline void round_row_to_bf16(const float* x, uint16_t* out, int64_t n) {
    if (out == nullptr) return;
#pragma omp simd
    for (int64_t i = 0; i < n; ++i) out[i] = round_to_bf16(x[i]);
}

// Column sums over a walk of rows in blocks of kRows: each block's rows are added into that block's own
// sums (f32, in vector lanes, while the rows are in cache), and total() adds the blocks in block order,
// so the sums are the same on any number of threads. `sums_per_row` sums per column (layer norm's
// weight and bias gradients: 2; 0: the blocks alone, nothing summed).
class RowBlockSums {
public:
    static constexpr int64_t kRows = 32;
    RowBlockSums(int64_t rows, int64_t columns, int64_t sums_per_row = 1);
    int64_t blocks() const { return blocks_; }
    int64_t first_row(int64_t block) const { return block * kRows; }
    int64_t end_row(int64_t block) const { return std::min(rows_, (block + 1) * kRows); }
    // Zeroes a block's sums, in its thread and in cache: call it before adding the block's first row.
    void start_block(int64_t block);
    float* block(int64_t block, int64_t which = 0) { return values_ + (which * blocks_ + block) * columns_; }
    // Where the column sums of one `which` go: over out's values, or added to them; out null: not wanted.
    struct Total {
        float* out = nullptr;
        bool accumulate = false;
    };
    // The column sums of each `which` into totals[which]. Called inside the parallel region that filled
    // the blocks, after its loop (whose barrier makes every block final), the region's threads share the
    // columns (an orphaned omp for), so totalling forks no region of its own; outside a region, one thread.
    void total(std::span<const Total> totals) const;

private:
    int64_t rows_, columns_, blocks_, sums_per_row_;
    Tensor sums_;  // (sums_per_row, blocks, columns)
    float* values_;
};

// dst = (accumulate ? dst : 0) + src summed over the axes along which dst's shape was broadcast
// to src's shape: the adjoint of broadcasting.
void accumulate_reduced(const Tensor& src, Tensor& dst, bool accumulate);

}  // namespace hnas::kernels

namespace hnas::kernels {

// out = in with its axes reordered: out axis i is in axis dims[i].
void permute_copy(const float* in, const Shape& in_shape, const std::vector<int>& dims, float* out);

// Along one axis of tensors viewed as (outer, length, inner): copy (or add) `count` slices starting at
// src_start of a src with src_length slices into dst starting at dst_start of a dst with dst_length.
void copy_axis_range(const float* src, int64_t src_length, int64_t src_start, float* dst, int64_t dst_length,
                     int64_t dst_start, int64_t count, int64_t outer, int64_t inner, bool add);

}  // namespace hnas::kernels
