// Layer normalization over the last axis, forward and backward fused per row.
#include <omp.h>

#include <cmath>

#include "backend/kernels.h"
#include "backend/matmul.h"
#include "ops/ops.h"

namespace hnas::ops {

Var layer_norm(const Var& x, const Var& weight, const Var& bias, float eps) {
    HNAS_CHECK(x.rank() >= 1, "layer_norm: input must have an axis to normalize");
    const int64_t width = x.dim(-1);
    HNAS_CHECK(weight.shape() == Shape{width} && bias.shape() == Shape{width}, "layer_norm: input ",
               shape_str(x.shape()), " needs weight and bias of shape (", width, "), got ", shape_str(weight.shape()),
               " and ", shape_str(bias.shape()));
    const int64_t rows = x.numel() / width;
    Tensor y = Tensor::empty(x.shape());
    Tensor row_mean = Tensor::empty({rows});
    Tensor row_rstd = Tensor::empty({rows});  // 1 / sqrt(var + eps), kept for the backward pass
    const float *in = x.value().data(), *w = weight.value().data(), *b = bias.value().data();
    float *out = y.data(), *mean = row_mean.data(), *rstd = row_rstd.data();
    // Most layer norms here feed linear layers (post-LN sublayers, pre-LN branches, final norms); under
    // bf16 the copy of one that does not (the MTE block's, paper 002) goes unread.
    uint16_t* rounded = backend::operand_copy_to_fill(y);
#pragma omp parallel for schedule(static) if (x.numel() >= kernels::kParallelGrain)
    for (int64_t r = 0; r < rows; ++r) {
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

    Tensor xv = x.value(), wv = weight.value();
    return make_result("layer_norm", y, {x, weight, bias}, [=](const Tensor& dy, GradSink& sink) {
        const float *in = xv.data(), *w = wv.data(), *g = dy.data(), *mean = row_mean.data(), *rstd = row_rstd.data();
        if (sink.wants(0)) {
            // With x̂ = (x − μ)·rstd and dx̂ = dy ⊙ w: dx = rstd · (dx̂ − mean(dx̂) − x̂ · mean(dx̂ ⊙ x̂)).
            const GradSink::Target target = sink.target(0);
            Tensor& dx = target.grad;
            const bool accumulate = target.accumulate;
            float* d = dx.data();
#pragma omp parallel for schedule(static) if (dx.numel() >= kernels::kParallelGrain)
            for (int64_t r = 0; r < rows; ++r) {
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
        if (sink.wants(1) || sink.wants(2)) {
            // dw = Σ_rows dy ⊙ x̂ and db = Σ_rows dy, reduced over per-thread partial sums.
            const int threads = omp_get_max_threads();
            std::vector<double> partial_w(static_cast<size_t>(threads * width), 0.0);
            std::vector<double> partial_b(static_cast<size_t>(threads * width), 0.0);
#pragma omp parallel if (dy.numel() >= kernels::kParallelGrain)
            {
                double* pw = partial_w.data() + omp_get_thread_num() * width;
                double* pb = partial_b.data() + omp_get_thread_num() * width;
#pragma omp for schedule(static)
                for (int64_t r = 0; r < rows; ++r) {
                    for (int64_t j = 0; j < width; ++j) {
                        const float xhat = (in[r * width + j] - mean[r]) * rstd[r];
                        pw[j] += g[r * width + j] * xhat;
                        pb[j] += g[r * width + j];
                    }
                }
            }
            auto reduce_into = [&](size_t input, const std::vector<double>& partial) {
                if (!sink.wants(input)) return;
                const GradSink::Target target = sink.target(input);
                Tensor& grad = target.grad;
                const bool accumulate = target.accumulate;
                float* dst = grad.data();
                for (int64_t j = 0; j < width; ++j) {
                    double total = 0.0;
                    for (int t = 0; t < threads; ++t) total += partial[static_cast<size_t>(t * width + j)];
                    write_gradient(dst[j], static_cast<float>(total), accumulate);
                }
            };
            reduce_into(1, partial_w);
            reduce_into(2, partial_b);
        }
    });
}

}  // namespace hnas::ops
