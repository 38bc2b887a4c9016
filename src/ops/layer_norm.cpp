// Layer normalization over the last axis: a named forward and backward, each fused per row.
#include <omp.h>

#include <cmath>
#include <vector>

#include "backend/kernels.h"
#include "backend/matmul.h"
#include "ops/ops.h"

namespace hnas::ops {

namespace {

// `rows` rows of `width` values, normalized independently.
struct RowLayout {
    int64_t rows = 0, width = 0;
    int64_t numel() const { return rows * width; }
};

// out = (x − μ)·rstd ⊙ w + b per row, with rstd = 1/√(var + eps); keeps μ and rstd for the backward
// and, when `rounded` is not null, the bf16 copy of each out row.
void layer_norm_forward(const float* in, const float* w, const float* b, float eps, const RowLayout& l, float* out,
                        uint16_t* rounded, float* mean, float* rstd) {
    const int64_t width = l.width;
#pragma omp parallel for schedule(static) if (l.numel() >= kernels::kParallelGrain)
    for (int64_t r = 0; r < l.rows; ++r) {
        const float* row = in + r * width;
        float total = 0.0f;
#pragma omp simd reduction(+ : total)
        for (int64_t j = 0; j < width; ++j) total += row[j];
        const float mu = total / static_cast<float>(width);
        float squares = 0.0f;
#pragma omp simd reduction(+ : squares)
        for (int64_t j = 0; j < width; ++j) squares += (row[j] - mu) * (row[j] - mu);
        const float inv = 1.0f / std::sqrt(squares / static_cast<float>(width) + eps);
#pragma omp simd
        for (int64_t j = 0; j < width; ++j) out[r * width + j] = (row[j] - mu) * inv * w[j] + b[j];
        kernels::round_row_to_bf16(out + r * width, rounded == nullptr ? nullptr : rounded + r * width, width);
        mean[r] = mu;
        rstd[r] = inv;
    }
}

// dx into `d`: with x̂ = (x − μ)·rstd and dx̂ = dy ⊙ w, dx = rstd · (dx̂ − mean(dx̂) − x̂ · mean(dx̂ ⊙ x̂)).
void layer_norm_backward_input(const float* in, const float* w, const float* g, const float* mean, const float* rstd,
                               const RowLayout& l, float* d, bool accumulate) {
    const int64_t width = l.width;
#pragma omp parallel for schedule(static) if (l.numel() >= kernels::kParallelGrain)
    for (int64_t r = 0; r < l.rows; ++r) {
        const float* row = in + r * width;
        const float* grow = g + r * width;
        float mean_dxhat = 0.0f, mean_dxhat_xhat = 0.0f;
#pragma omp simd reduction(+ : mean_dxhat, mean_dxhat_xhat)
        for (int64_t j = 0; j < width; ++j) {
            const float xhat = (row[j] - mean[r]) * rstd[r];
            const float dxhat = grow[j] * w[j];
            mean_dxhat += dxhat;
            mean_dxhat_xhat += dxhat * xhat;
        }
        mean_dxhat /= static_cast<float>(width);
        mean_dxhat_xhat /= static_cast<float>(width);
        float* drow = d + r * width;
#pragma omp simd
        for (int64_t j = 0; j < width; ++j) {
            const float xhat = (row[j] - mean[r]) * rstd[r];
            const float value = rstd[r] * (grow[j] * w[j] - mean_dxhat - xhat * mean_dxhat_xhat);
            write_gradient(drow[j], value, accumulate);
        }
    }
}

// dw = Σ_rows dy ⊙ x̂ and db = Σ_rows dy into the sink's inputs 1 and 2 (those it wants), reduced over
// per-thread partial sums in double.
void layer_norm_backward_parameters(const float* in, const float* g, const float* mean, const float* rstd,
                                    const RowLayout& l, GradSink& sink) {
    const int64_t width = l.width;
    const int threads = omp_get_max_threads();
    std::vector<double> partial_w(static_cast<size_t>(threads * width), 0.0);
    std::vector<double> partial_b(static_cast<size_t>(threads * width), 0.0);
#pragma omp parallel if (l.numel() >= kernels::kParallelGrain)
    {
        double* pw = partial_w.data() + omp_get_thread_num() * width;
        double* pb = partial_b.data() + omp_get_thread_num() * width;
#pragma omp for schedule(static)
        for (int64_t r = 0; r < l.rows; ++r) {
            for (int64_t j = 0; j < width; ++j) {
                const float xhat = (in[r * width + j] - mean[r]) * rstd[r];
                pw[j] += g[r * width + j] * xhat;
                pb[j] += g[r * width + j];
            }
        }
    }
    for (size_t input : {size_t{1}, size_t{2}}) {
        if (!sink.wants(input)) continue;
        const std::vector<double>& partial = input == 1 ? partial_w : partial_b;
        const GradSink::Target target = sink.target(input);
        float* dst = target.grad.data();
        for (int64_t j = 0; j < width; ++j) {
            double total = 0.0;
            for (int t = 0; t < threads; ++t) total += partial[static_cast<size_t>(t * width + j)];
            write_gradient(dst[j], static_cast<float>(total), target.accumulate);
        }
    }
}

}  // namespace

Var layer_norm(const Var& x, const Var& weight, const Var& bias, float eps) {
    HNAS_CHECK(x.rank() >= 1, "layer_norm: input must have an axis to normalize");
    const int64_t width = x.dim(-1);
    HNAS_CHECK(weight.shape() == Shape{width} && bias.shape() == Shape{width}, "layer_norm: input ",
               shape_str(x.shape()), " needs weight and bias of shape (", width, "), got ", shape_str(weight.shape()),
               " and ", shape_str(bias.shape()));
    const RowLayout layout{x.numel() / width, width};
    Tensor y = Tensor::empty(x.shape());
    Tensor row_mean = Tensor::empty({layout.rows});
    Tensor row_rstd = Tensor::empty({layout.rows});  // 1 / sqrt(var + eps), kept for the backward pass
    float* out = y.data();  // before the bf16 copy is claimed: a mutable data() marks the copy stale
    // Most layer norms here feed linear layers (post-LN sublayers, pre-LN branches, final norms); under
    // bf16 the copy of one that does not (the MTE block's, paper 002) goes unread.
    uint16_t* rounded = backend::operand_copy_to_fill(y);
    layer_norm_forward(x.value().data(), weight.value().data(), bias.value().data(), eps, layout, out, rounded,
                       row_mean.data(), row_rstd.data());
    Tensor xv = x.value(), wv = weight.value();
    return make_result("layer_norm", y, {x, weight, bias}, [=](const Tensor& dy, GradSink& sink) {
        if (sink.wants(0)) {
            const GradSink::Target target = sink.target(0);
            layer_norm_backward_input(xv.data(), wv.data(), dy.data(), row_mean.data(), row_rstd.data(), layout,
                                      target.grad.data(), target.accumulate);
        }
        if (sink.wants(1) || sink.wants(2))
            layer_norm_backward_parameters(xv.data(), dy.data(), row_mean.data(), row_rstd.data(), layout, sink);
    });
}

}  // namespace hnas::ops
