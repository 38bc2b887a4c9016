// Inverted dropout with a mask that depends only on one RNG draw and the element index.
#include "backend/kernels.h"
#include "ops/ops.h"

namespace hnas::ops {

Var dropout(const Var& x, float p, Rng& rng) {
    HNAS_CHECK(p >= 0.0f && p < 1.0f, "dropout: probability must be in [0, 1), got ", p);
    if (p == 0.0f) return x;
    const uint64_t key = rng.next_u64();
    const float keep_scale = 1.0f / (1.0f - p);
    // The scaled keep mask (0 or 1/(1-p)) is the derivative, so backward is a product with it.
    Tensor mask = Tensor::empty(x.shape());
    Tensor y = Tensor::empty(x.shape());
    const float* in = x.value().data();
    float *m = mask.data(), *out = y.data();
    const int64_t n = x.numel();
#pragma omp parallel for simd schedule(static) if (n >= kernels::kParallelGrain)
    for (int64_t i = 0; i < n; ++i) {
        m[i] = unit_float(mix64(key + static_cast<uint64_t>(i))) < p ? 0.0f : keep_scale;
        out[i] = in[i] * m[i];
    }
    return make_result("dropout", y, {x}, [mask](const Tensor& dy, GradSink& sink) {
        const GradSink::Target target = sink.target(0);
        Tensor& dx = target.grad;
        const bool accumulate = target.accumulate;
        const float *g = dy.data(), *m = mask.data();
        float* d = dx.data();
        const int64_t n = dx.numel();
#pragma omp parallel for simd schedule(static) if (n >= kernels::kParallelGrain)
        for (int64_t i = 0; i < n; ++i) write_gradient(d[i], g[i] * m[i], accumulate);
    });
}

}  // namespace hnas::ops
