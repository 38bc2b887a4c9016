// Reductions along one axis: sum, mean, max and logsumexp. Tensors are viewed as (outer, length, inner)
// around the reduced axis, so the same loops serve every axis.
#include <cmath>
#include <limits>

#include "backend/kernels.h"
#include "ops/ops.h"

namespace hnas::ops {

namespace {

struct Reduction {
    AxisSplit split;
    Shape out_shape;
};

Reduction plan_reduction(const Shape& shape, int axis, bool keepdim, const char* op) {
    const int normalized = normalize_axis(axis, static_cast<int>(shape.size()), op);
    Reduction r{split_at_axis(shape, normalized), shape};
    if (keepdim) {
        r.out_shape[static_cast<size_t>(normalized)] = 1;
    } else {
        r.out_shape.erase(r.out_shape.begin() + normalized);
    }
    return r;
}

// dx[o, k, i] (+)= dy[o, i] · factor: the gradient of a sum, spread back along the reduced axis.
void spread_gradient(const Tensor& dy, GradSink& sink, const AxisSplit& split, float factor) {
    const GradSink::Target target = sink.target(0);
    Tensor& dx = target.grad;
    const bool accumulate = target.accumulate;
    const float* g = dy.data();
    float* d = dx.data();
#pragma omp parallel for schedule(static) if (dx.numel() >= kernels::kParallelGrain)
    for (int64_t o = 0; o < split.outer; ++o) {
        for (int64_t k = 0; k < split.length; ++k) {
            float* row = d + (o * split.length + k) * split.inner;
            const float* grow = g + o * split.inner;
            for (int64_t i = 0; i < split.inner; ++i) write_gradient(row[i], factor * grow[i], accumulate);
        }
    }
}

Var sum_scaled(const char* name, const Var& x, int axis, bool keepdim, float factor) {
    const Reduction r = plan_reduction(x.shape(), axis, keepdim, name);
    const AxisSplit split = r.split;
    Tensor out = Tensor::empty(r.out_shape);
    const float* in = x.value().data();
    float* o_data = out.data();
#pragma omp parallel for schedule(static) if (x.numel() >= kernels::kParallelGrain)
    for (int64_t o = 0; o < split.outer; ++o) {
        float* dst = o_data + o * split.inner;
        for (int64_t i = 0; i < split.inner; ++i) dst[i] = 0.0f;
        for (int64_t k = 0; k < split.length; ++k) {
            const float* row = in + (o * split.length + k) * split.inner;
            for (int64_t i = 0; i < split.inner; ++i) dst[i] += row[i];
        }
        for (int64_t i = 0; i < split.inner; ++i) dst[i] *= factor;
    }
    return make_result(name, out, {x}, [split, factor](const Tensor& dy, GradSink& sink) {
        spread_gradient(dy, sink, split, factor);
    });
}

}  // namespace

Var sum(const Var& x, int axis, bool keepdim) { return sum_scaled("sum", x, axis, keepdim, 1.0f); }

Var mean(const Var& x, int axis, bool keepdim) {
    const int normalized = normalize_axis(axis, x.rank(), "mean");
    const int64_t length = x.dim(normalized);
    HNAS_CHECK(length > 0, "mean: empty axis ", axis, " in ", shape_str(x.shape()));
    return sum_scaled("mean", x, axis, keepdim, 1.0f / static_cast<float>(length));
}

Var sum_all(const Var& x) {
    Var flat = reshape(x, {x.numel()});
    return reshape(sum(flat, 0), {});
}

Var max(const Var& x, int axis, bool keepdim) {
    const Reduction r = plan_reduction(x.shape(), axis, keepdim, "max");
    const AxisSplit split = r.split;
    HNAS_CHECK(split.length > 0, "max: empty axis ", axis, " in ", shape_str(x.shape()));
    Tensor out = Tensor::empty(r.out_shape);
    Tensor argmax = Tensor::empty(r.out_shape, DType::i32);
    const float* in = x.value().data();
    float* o_data = out.data();
    int32_t* arg = argmax.ints();
#pragma omp parallel for schedule(static) if (x.numel() >= kernels::kParallelGrain)
    for (int64_t o = 0; o < split.outer; ++o) {
        for (int64_t i = 0; i < split.inner; ++i) {
            const float* column = in + o * split.length * split.inner + i;
            int32_t best = 0;
            for (int64_t k = 1; k < split.length; ++k) {
                if (column[k * split.inner] > column[best * split.inner]) best = static_cast<int32_t>(k);
            }
            o_data[o * split.inner + i] = column[best * split.inner];
            arg[o * split.inner + i] = best;
        }
    }
    return make_result("max", out, {x}, [split, argmax](const Tensor& dy, GradSink& sink) {
        const GradSink::Target target = sink.target(0);
        Tensor& dx = target.grad;
        const bool accumulate = target.accumulate;
        if (!accumulate) dx.fill(0.0f);
        const float* g = dy.data();
        const int32_t* best = argmax.ints();
        float* d = dx.data();
        for (int64_t o = 0; o < split.outer; ++o) {
            for (int64_t i = 0; i < split.inner; ++i) {
                const int64_t at = o * split.inner + i;
                d[(o * split.length + best[at]) * split.inner + i] += g[at];
            }
        }
    });
}

Var logsumexp(const Var& x, int axis, bool keepdim) {
    const Reduction r = plan_reduction(x.shape(), axis, keepdim, "logsumexp");
    const AxisSplit split = r.split;
    HNAS_CHECK(split.length > 0, "logsumexp: empty axis ", axis, " in ", shape_str(x.shape()));
    Tensor out = Tensor::empty(r.out_shape);
    const float* in = x.value().data();
    float* o_data = out.data();
#pragma omp parallel for schedule(static) if (x.numel() >= kernels::kParallelGrain)
    for (int64_t o = 0; o < split.outer; ++o) {
        for (int64_t i = 0; i < split.inner; ++i) {
            const float* column = in + o * split.length * split.inner + i;
            float top = -std::numeric_limits<float>::infinity();
            for (int64_t k = 0; k < split.length; ++k) top = std::max(top, column[k * split.inner]);
            double total = 0.0;
            for (int64_t k = 0; k < split.length; ++k) total += std::exp(column[k * split.inner] - top);
            o_data[o * split.inner + i] = top + static_cast<float>(std::log(total));
        }
    }
    Tensor xv = x.value();
    return make_result("logsumexp", out, {x}, [split, xv, out](const Tensor& dy, GradSink& sink) {
        // d logsumexp / dx_k = softmax(x)_k = exp(x_k - logsumexp(x))
        const GradSink::Target target = sink.target(0);
        Tensor& dx = target.grad;
        const bool accumulate = target.accumulate;
        const float *in = xv.data(), *lse = out.data(), *g = dy.data();
        float* d = dx.data();
#pragma omp parallel for schedule(static) if (dx.numel() >= kernels::kParallelGrain)
        for (int64_t o = 0; o < split.outer; ++o) {
            for (int64_t k = 0; k < split.length; ++k) {
                const int64_t row = (o * split.length + k) * split.inner;
                for (int64_t i = 0; i < split.inner; ++i) {
                    const float value = g[o * split.inner + i] * std::exp(in[row + i] - lse[o * split.inner + i]);
                    write_gradient(d[row + i], value, accumulate);
                }
            }
        }
    });
}

}  // namespace hnas::ops
