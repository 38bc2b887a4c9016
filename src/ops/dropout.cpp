// Inverted dropout with a mask that depends only on one RNG draw and the element index, alone and
// fused with the residual sum that follows it in every transformer sublayer.
#include "backend/kernels.h"
#include "ops/ops.h"

namespace hnas::ops {

namespace {

// Element i's factor: 0 with probability p, else 1/(1-p); a pure function of the op's key and i.
inline float keep_factor(uint64_t key, int64_t i, float p, float keep_scale) {
    return unit_float(mix64(key + static_cast<uint64_t>(i))) < p ? 0.0f : keep_scale;
}

// The dropped input's gradient, dy ⊙ mask: the mask (0 or 1/(1-p)) is the derivative.
void add_masked_gradient(const Tensor& dy, const Tensor& mask, GradSink& sink, size_t input) {
    const GradSink::Target target = sink.target(input);
    Tensor& dx = target.grad;
    const bool accumulate = target.accumulate;
    const float *g = dy.data(), *m = mask.data();
    float* d = dx.data();
    const int64_t n = dx.numel();
#pragma omp parallel for simd schedule(static) if (n >= kernels::kParallelGrain)
    for (int64_t i = 0; i < n; ++i) write_gradient(d[i], g[i] * m[i], accumulate);
}

void check_probability(const char* op, float p) {
    HNAS_CHECK(p >= 0.0f && p < 1.0f, op, ": probability must be in [0, 1), got ", p);
}

}  // namespace

Var dropout(const Var& x, float p, Rng& rng) {
    check_probability("dropout", p);
    if (p == 0.0f) return x;
    const uint64_t key = rng.next_u64();
    const float keep_scale = 1.0f / (1.0f - p);
    Tensor mask = Tensor::empty(x.shape());
    Tensor y = Tensor::empty(x.shape());
    const float* in = x.value().data();
    float *m = mask.data(), *out = y.data();
    const int64_t n = x.numel();
#pragma omp parallel for simd schedule(static) if (n >= kernels::kParallelGrain)
    for (int64_t i = 0; i < n; ++i) {
        m[i] = keep_factor(key, i, p, keep_scale);
        out[i] = in[i] * m[i];
    }
    return make_result("dropout", y, {x}, [mask](const Tensor& dy, GradSink& sink) { add_masked_gradient(dy, mask, sink, 0); });
}

// add(residual, dropout(branch, p, rng)) in one pass over the three arrays instead of two passes over
// five; the same mask, since it draws the same key (the sum may round once instead of twice: FMA).
Var dropout_add(const Var& residual, const Var& branch, float p, Rng& rng) {
    check_probability("dropout_add", p);
    HNAS_CHECK(residual.shape() == branch.shape(), "dropout_add: residual ", shape_str(residual.shape()), " and branch ",
               shape_str(branch.shape()), " differ");
    if (p == 0.0f) return add(residual, branch);
    const uint64_t key = rng.next_u64();
    const float keep_scale = 1.0f / (1.0f - p);
    Tensor mask = Tensor::empty(branch.shape());
    Tensor y = Tensor::empty(branch.shape());
    const float *in = branch.value().data(), *skip = residual.value().data();
    float *m = mask.data(), *out = y.data();
    const int64_t n = branch.numel();
#pragma omp parallel for simd schedule(static) if (n >= kernels::kParallelGrain)
    for (int64_t i = 0; i < n; ++i) {
        m[i] = keep_factor(key, i, p, keep_scale);
        out[i] = skip[i] + in[i] * m[i];
    }
    return make_result("dropout_add", y, {residual, branch}, [mask](const Tensor& dy, GradSink& sink) {
        sink.add(0, dy);
        if (sink.wants(1)) add_masked_gradient(dy, mask, sink, 1);
    });
}

}  // namespace hnas::ops
