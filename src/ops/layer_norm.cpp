// Layer normalization over the last axis, forward and backward fused per row; and the post-LN
// residual block's layer_norm(x + dropout(branch)) as one kernel over the same row code.
#include <omp.h>

#include <cmath>

#include "backend/kernels.h"
#include "ops/dropout_mask.h"
#include "ops/ops.h"

namespace hnas::ops {

namespace {

// One row: its mean and 1/sqrt(var + eps) (kept for backward), and the normalized, scaled row.
inline void normalize_row(const float* row, const float* w, const float* b, int64_t width, float eps, float* out,
                          float& mean, float& rstd) {
    float total = 0.0f;
#pragma omp simd reduction(+ : total)
    for (int64_t j = 0; j < width; ++j) total += row[j];
    const float mu = total / static_cast<float>(width);
    float squares = 0.0f;
#pragma omp simd reduction(+ : squares)
    for (int64_t j = 0; j < width; ++j) squares += (row[j] - mu) * (row[j] - mu);
    const float inv = 1.0f / std::sqrt(squares / static_cast<float>(width) + eps);
#pragma omp simd
    for (int64_t j = 0; j < width; ++j) out[j] = (row[j] - mu) * inv * w[j] + b[j];
    mean = mu;
    rstd = inv;
}

// Layer norm's backward from its input `in` (rows, width): dweight and dbias into inputs `weight_input`
// and `weight_input + 1` of the sink when it wants them, and the input's gradient handed to
// write_input(r, j, value) element by element.
template <typename WriteInput>
void layer_norm_backward(const float* in, const float* w, const float* g, const float* mean, const float* rstd, int64_t rows,
                         int64_t width, bool wants_input, GradSink& sink, size_t weight_input, WriteInput write_input) {
    if (wants_input) {
        // With x̂ = (x − μ)·rstd and dx̂ = dy ⊙ w: dx = rstd · (dx̂ − mean(dx̂) − x̂ · mean(dx̂ ⊙ x̂)).
#pragma omp parallel for schedule(static) if (rows * width >= kernels::kParallelGrain)
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
#pragma omp simd
            for (int64_t j = 0; j < width; ++j) {
                const float xhat = (row[j] - mean[r]) * rstd[r];
                write_input(r, j, rstd[r] * (grow[j] * w[j] - mean_dxhat - xhat * mean_dxhat_xhat));
            }
        }
    }
    const size_t bias_input = weight_input + 1;
    if (!sink.wants(weight_input) && !sink.wants(bias_input)) return;
    // dw = Σ_rows dy ⊙ x̂ and db = Σ_rows dy, reduced over per-thread partial sums.
    const int threads = omp_get_max_threads();
    std::vector<double> partial_w(static_cast<size_t>(threads * width), 0.0);
    std::vector<double> partial_b(static_cast<size_t>(threads * width), 0.0);
#pragma omp parallel if (rows * width >= kernels::kParallelGrain)
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
        float* dst = target.grad.data();
        for (int64_t j = 0; j < width; ++j) {
            double total = 0.0;
            for (int t = 0; t < threads; ++t) total += partial[static_cast<size_t>(t * width + j)];
            write_gradient(dst[j], static_cast<float>(total), target.accumulate);
        }
    };
    reduce_into(weight_input, partial_w);
    reduce_into(bias_input, partial_b);
}

void check_norm_parameters(const char* op, const Var& x, const Var& weight, const Var& bias) {
    HNAS_CHECK(x.rank() >= 1, op, ": input must have an axis to normalize");
    const int64_t width = x.dim(-1);
    HNAS_CHECK(weight.shape() == Shape{width} && bias.shape() == Shape{width}, op, ": input ", shape_str(x.shape()),
               " needs weight and bias of shape (", width, "), got ", shape_str(weight.shape()), " and ",
               shape_str(bias.shape()));
}

}  // namespace

Var layer_norm(const Var& x, const Var& weight, const Var& bias, float eps) {
    check_norm_parameters("layer_norm", x, weight, bias);
    const int64_t width = x.dim(-1);
    const int64_t rows = x.numel() / width;
    Tensor y = Tensor::empty(x.shape());
    Tensor row_mean = Tensor::empty({rows});
    Tensor row_rstd = Tensor::empty({rows});  // 1 / sqrt(var + eps), kept for the backward pass
    const float *in = x.value().data(), *w = weight.value().data(), *b = bias.value().data();
    float *out = y.data(), *mean = row_mean.data(), *rstd = row_rstd.data();
#pragma omp parallel for schedule(static) if (x.numel() >= kernels::kParallelGrain)
    for (int64_t r = 0; r < rows; ++r) normalize_row(in + r * width, w, b, width, eps, out + r * width, mean[r], rstd[r]);

    Tensor xv = x.value(), wv = weight.value();
    return make_result("layer_norm", y, {x, weight, bias}, [=](const Tensor& dy, GradSink& sink) {
        float* dx = nullptr;
        bool accumulate = false;
        if (sink.wants(0)) {
            const GradSink::Target target = sink.target(0);
            dx = target.grad.data();
            accumulate = target.accumulate;
        }
        layer_norm_backward(xv.data(), wv.data(), dy.data(), row_mean.data(), row_rstd.data(), rows, width, dx != nullptr,
                            sink, 1, [=](int64_t r, int64_t j, float value) {
                                write_gradient(dx[r * width + j], value, accumulate);
                            });
    });
}

Var residual_layer_norm(const Var& x, const Var& branch, const Var& weight, const Var& bias, float eps, float p,
                        Rng& rng) {
    check_norm_parameters("residual_layer_norm", x, weight, bias);
    HNAS_CHECK(branch.shape() == x.shape(), "residual_layer_norm: branch ", shape_str(branch.shape()),
               " does not match the residual input ", shape_str(x.shape()));
    HNAS_CHECK(p >= 0.0f && p < 1.0f, "residual_layer_norm: dropout probability must be in [0, 1), got ", p);
    const int64_t width = x.dim(-1);
    const int64_t rows = x.numel() / width;
    // dropout(branch, p, rng) draws its key only when p > 0, as here, so both keep the stream in step.
    const uint64_t key = p > 0.0f ? rng.next_u64() : 0;
    const float keep_scale = 1.0f / (1.0f - p);
    Tensor sum = Tensor::empty(x.shape());  // x + dropout(branch): the normalized input, kept for backward
    Tensor y = Tensor::empty(x.shape());
    Tensor row_mean = Tensor::empty({rows});
    Tensor row_rstd = Tensor::empty({rows});
    const float *in = x.value().data(), *br = branch.value().data(), *w = weight.value().data(), *b = bias.value().data();
    float *s = sum.data(), *out = y.data(), *mean = row_mean.data(), *rstd = row_rstd.data();
#pragma omp parallel for schedule(static) if (x.numel() >= kernels::kParallelGrain)
    for (int64_t r = 0; r < rows; ++r) {
        float* srow = s + r * width;
        if (p > 0.0f) {
#pragma omp simd
            for (int64_t j = 0; j < width; ++j)
                srow[j] = in[r * width + j] + br[r * width + j] * dropout_mask(key, r * width + j, p, keep_scale);
        } else {
#pragma omp simd
            for (int64_t j = 0; j < width; ++j) srow[j] = in[r * width + j] + br[r * width + j];
        }
        normalize_row(srow, w, b, width, eps, out + r * width, mean[r], rstd[r]);
    }

    Tensor wv = weight.value();
    return make_result("residual_layer_norm", y, {x, branch, weight, bias}, [=](const Tensor& dy, GradSink& sink) {
        // d(sum) goes to x as it is and to the branch through the dropout mask.
        float *dx = nullptr, *dbranch = nullptr;
        bool accumulate_x = false, accumulate_branch = false;
        if (sink.wants(0)) {
            const GradSink::Target target = sink.target(0);
            dx = target.grad.data();
            accumulate_x = target.accumulate;
        }
        if (sink.wants(1)) {
            const GradSink::Target target = sink.target(1);
            dbranch = target.grad.data();
            accumulate_branch = target.accumulate;
        }
        layer_norm_backward(sum.data(), wv.data(), dy.data(), row_mean.data(), row_rstd.data(), rows, width,
                            dx != nullptr || dbranch != nullptr, sink, 2, [=](int64_t r, int64_t j, float value) {
                                const int64_t i = r * width + j;
                                if (dx) write_gradient(dx[i], value, accumulate_x);
                                if (dbranch) {
                                    const float mask = p > 0.0f ? dropout_mask(key, i, p, keep_scale) : 1.0f;
                                    write_gradient(dbranch[i], value * mask, accumulate_branch);
                                }
                            });
    });
}

}  // namespace hnas::ops
