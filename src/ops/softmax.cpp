// softmax and log-softmax along any axis, with an additive mask broadcast against the input.
// Attention normalizes over keys (the last axis) and, for doubly-normalized attention, over queries
// (the axis before it), so both layouts are served by one (outer, length, inner) walk.
#include <cmath>
#include <limits>
#include <vector>

#include "backend/kernels.h"
#include "ops/ops.h"

namespace hnas::ops {

namespace {

// Offsets into a broadcast mask for every (outer, k, inner) position of the input.
struct MaskIndex {
    std::vector<int64_t> outer_offsets, inner_offsets;
    int64_t axis_stride = 0;
};

MaskIndex index_mask(const Tensor& mask, const Shape& shape, int axis, const AxisSplit& split) {
    MaskIndex index;
    const std::vector<int64_t> strides = broadcast_strides(mask.shape(), shape);
    index.axis_stride = strides[static_cast<size_t>(axis)];
    auto offsets_over = [&](int first, int last, int64_t count) {
        std::vector<int64_t> offsets(static_cast<size_t>(count), 0);
        for (int64_t flat = 0; flat < count; ++flat) {
            int64_t rest = flat, offset = 0;
            for (int d = last - 1; d >= first; --d) {
                offset += (rest % shape[static_cast<size_t>(d)]) * strides[static_cast<size_t>(d)];
                rest /= shape[static_cast<size_t>(d)];
            }
            offsets[static_cast<size_t>(flat)] = offset;
        }
        return offsets;
    };
    index.outer_offsets = offsets_over(0, axis, split.outer);
    index.inner_offsets = offsets_over(axis + 1, static_cast<int>(shape.size()), split.inner);
    return index;
}

Var normalize(const char* name, const Var& x, int axis, const Tensor& mask, bool log_space) {
    const int normalized = normalize_axis(axis, x.rank(), name);
    const AxisSplit split = split_at_axis(x.shape(), normalized);
    const bool masked = mask.defined();
    if (masked) broadcast_shapes(mask.shape(), x.shape(), name);  // throws naming the op and shapes
    const MaskIndex mask_index = masked ? index_mask(mask, x.shape(), normalized, split) : MaskIndex{};
    const float* mask_data = masked ? mask.data() : nullptr;

    Tensor y = Tensor::empty(x.shape());
    const float* in = x.value().data();
    float* out = y.data();
#pragma omp parallel for collapse(2) schedule(static) if (x.numel() >= kernels::kParallelGrain)
    for (int64_t o = 0; o < split.outer; ++o) {
        for (int64_t i = 0; i < split.inner; ++i) {
            const int64_t base = o * split.length * split.inner + i;
            const float* mask_base =
                masked ? mask_data + mask_index.outer_offsets[static_cast<size_t>(o)] +
                             mask_index.inner_offsets[static_cast<size_t>(i)]
                       : nullptr;
            auto score = [&](int64_t k) {
                const float value = in[base + k * split.inner];
                return masked ? value + mask_base[k * mask_index.axis_stride] : value;
            };
            float top = -std::numeric_limits<float>::infinity();
            for (int64_t k = 0; k < split.length; ++k) top = std::max(top, score(k));
            float total = 0.0f;
            for (int64_t k = 0; k < split.length; ++k) {
                const float e = std::exp(score(k) - top);
                out[base + k * split.inner] = e;
                total += e;
            }
            if (log_space) {
                const float log_total = std::log(total);
                for (int64_t k = 0; k < split.length; ++k) out[base + k * split.inner] = score(k) - top - log_total;
            } else {
                const float inverse = 1.0f / total;
                for (int64_t k = 0; k < split.length; ++k) out[base + k * split.inner] *= inverse;
            }
        }
    }

    return make_result(name, y, {x}, [split, y, log_space](const Tensor& dy, GradSink& sink) {
        // softmax:     dx = y ⊙ (dy − Σ_k dy·y)
        // log-softmax: dx = dy − exp(y) · Σ_k dy
        const GradSink::Target target = sink.target(0);
        Tensor& dx = target.grad;
        const bool accumulate = target.accumulate;
        const float *g = dy.data(), *out = y.data();
        float* d = dx.data();
#pragma omp parallel for collapse(2) schedule(static) if (dx.numel() >= kernels::kParallelGrain)
        for (int64_t o = 0; o < split.outer; ++o) {
            for (int64_t i = 0; i < split.inner; ++i) {
                const int64_t base = o * split.length * split.inner + i;
                float dot = 0.0f;
                for (int64_t k = 0; k < split.length; ++k) {
                    const int64_t at = base + k * split.inner;
                    dot += log_space ? g[at] : g[at] * out[at];
                }
                for (int64_t k = 0; k < split.length; ++k) {
                    const int64_t at = base + k * split.inner;
                    const float value = log_space ? g[at] - std::exp(out[at]) * dot : out[at] * (g[at] - dot);
                    write_gradient(d[at], value, accumulate);
                }
            }
        }
    });
}

}  // namespace

Var softmax(const Var& x, int axis, const Tensor& mask) { return normalize("softmax", x, axis, mask, false); }

Var log_softmax(const Var& x, int axis, const Tensor& mask) { return normalize("log_softmax", x, axis, mask, true); }

}  // namespace hnas::ops
