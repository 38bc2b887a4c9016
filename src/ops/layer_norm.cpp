// Layer normalization over the last axis: a named forward and backward, each fused per row; and fused
// with the residual sum and dropout before it (a post-LN sublayer), one pass each way.
#include <algorithm>
#include <array>
#include <cmath>
#include <optional>
#include <utility>
#include <vector>

#include "backend/kernels.h"
#include "backend/matmul.h"
#include "ops/dropout_mask.h"
#include "ops/ops.h"

namespace hnas::ops {

namespace {

// `rows` rows of `width` values, normalized independently.
struct RowLayout {
    int64_t rows = 0, width = 0;
    int64_t numel() const { return rows * width; }
};

// One row's mean μ and rstd = 1/√(var + eps).
struct RowStatistics {
    float mean, rstd;
};

inline RowStatistics row_statistics(const float* row, int64_t width, float eps) {
    float total = 0.0f;
#pragma omp simd reduction(+ : total)
    for (int64_t j = 0; j < width; ++j) total += row[j];
    const float mu = total / static_cast<float>(width);
    float squares = 0.0f;
#pragma omp simd reduction(+ : squares)
    for (int64_t j = 0; j < width; ++j) squares += (row[j] - mu) * (row[j] - mu);
    return {mu, 1.0f / std::sqrt(squares / static_cast<float>(width) + eps)};
}

// out = (row − μ)·rstd ⊙ w + b, and its bf16 copy when `rounded` is not null.
inline void normalize_row(const float* row, const float* w, const float* b, RowStatistics st, int64_t width, float* out,
                          uint16_t* rounded) {
#pragma omp simd
    for (int64_t j = 0; j < width; ++j) out[j] = (row[j] - st.mean) * st.rstd * w[j] + b[j];
    kernels::round_row_to_bf16(out, rounded, width);
}

// out = (x − μ)·rstd ⊙ w + b per row, with rstd = 1/√(var + eps); keeps μ and rstd for the backward
// and, when `rounded` is not null, the bf16 copy of each out row.
void layer_norm_forward(const float* in, const float* w, const float* b, float eps, const RowLayout& l, float* out,
                        uint16_t* rounded, float* mean, float* rstd) {
    const int64_t width = l.width;
#pragma omp parallel for schedule(static) if (l.numel() >= kernels::kParallelGrain)
    for (int64_t r = 0; r < l.rows; ++r) {
        const RowStatistics st = row_statistics(in + r * width, width, eps);
        normalize_row(in + r * width, w, b, st, width, out + r * width, rounded == nullptr ? nullptr : rounded + r * width);
        mean[r] = st.mean;
        rstd[r] = st.rstd;
    }
}

// With x̂ = (x − μ)·rstd and dx̂ = dy ⊙ w, one row's mean(dx̂) and mean(dx̂ ⊙ x̂): then
// dx = rstd · (dx̂ − mean(dx̂) − x̂ · mean(dx̂ ⊙ x̂)).
struct RowGradientMeans {
    float dxhat, dxhat_xhat;
};

inline RowGradientMeans row_gradient_means(const float* row, const float* w, const float* grow, RowStatistics st,
                                           int64_t width) {
    float mean_dxhat = 0.0f, mean_dxhat_xhat = 0.0f;
#pragma omp simd reduction(+ : mean_dxhat, mean_dxhat_xhat)
    for (int64_t j = 0; j < width; ++j) {
        const float xhat = (row[j] - st.mean) * st.rstd;
        const float dxhat = grow[j] * w[j];
        mean_dxhat += dxhat;
        mean_dxhat_xhat += dxhat * xhat;
    }
    return {mean_dxhat / static_cast<float>(width), mean_dxhat_xhat / static_cast<float>(width)};
}

// dx into `d`.
void layer_norm_backward_input(const float* in, const float* w, const float* g, const float* mean, const float* rstd,
                               const RowLayout& l, float* d, bool accumulate) {
    const int64_t width = l.width;
#pragma omp parallel for schedule(static) if (l.numel() >= kernels::kParallelGrain)
    for (int64_t r = 0; r < l.rows; ++r) {
        const float *row = in + r * width, *grow = g + r * width;
        const RowStatistics st{mean[r], rstd[r]};
        const RowGradientMeans m = row_gradient_means(row, w, grow, st, width);
        float* drow = d + r * width;
#pragma omp simd
        for (int64_t j = 0; j < width; ++j) {
            const float xhat = (row[j] - st.mean) * st.rstd;
            write_gradient(drow[j], st.rstd * (grow[j] * w[j] - m.dxhat - xhat * m.dxhat_xhat), accumulate);
        }
    }
}

// One row's terms of dw = Σ_rows dy ⊙ x̂ and db = Σ_rows dy, into its block's sums (0: dw, 1: db).
inline void add_parameter_terms(const float* row, const float* grow, RowStatistics st, int64_t width,
                                kernels::RowBlockSums& sums, int64_t block) {
    float* dw = sums.block(block, 0);
    float* db = sums.block(block, 1);
#pragma omp simd
    for (int64_t j = 0; j < width; ++j) {
        dw[j] += grow[j] * ((row[j] - st.mean) * st.rstd);
        db[j] += grow[j];
    }
}

// Where the block sums go (0: dw, 1: db): the sink's inputs `weight` and `bias`, those it wants, taken
// before the parallel region that totals into them.
std::array<kernels::RowBlockSums::Total, 2> parameter_totals(GradSink& sink, size_t weight, size_t bias) {
    std::array<kernels::RowBlockSums::Total, 2> totals;
    for (const auto& [which, input] : {std::pair<size_t, size_t>{0, weight}, {1, bias}}) {
        if (!sink.wants(input)) continue;
        const GradSink::Target target = sink.target(input);
        totals[which] = {target.grad.data(), target.accumulate};
    }
    return totals;
}

void layer_norm_backward_parameters(const float* in, const float* g, const float* mean, const float* rstd,
                                    const RowLayout& l, GradSink& sink) {
    kernels::RowBlockSums sums(l.rows, l.width, 2);
    const std::array<kernels::RowBlockSums::Total, 2> totals = parameter_totals(sink, 1, 2);
#pragma omp parallel if (l.numel() >= kernels::kParallelGrain)
    {
#pragma omp for schedule(static)
        for (int64_t block = 0; block < sums.blocks(); ++block) {
            sums.start_block(block);
            for (int64_t r = sums.first_row(block); r < sums.end_row(block); ++r)
                add_parameter_terms(in + r * l.width, g + r * l.width, {mean[r], rstd[r]}, l.width, sums, block);
        }
        sums.total(totals);
    }
}

RowLayout check_layer_norm(const char* op, const Var& x, const Var& weight, const Var& bias) {
    HNAS_CHECK(x.rank() >= 1, op, ": input must have an axis to normalize");
    const int64_t width = x.dim(-1);
    HNAS_CHECK(weight.shape() == Shape{width} && bias.shape() == Shape{width}, op, ": input ", shape_str(x.shape()),
               " needs weight and bias of shape (", width, "), got ", shape_str(weight.shape()), " and ",
               shape_str(bias.shape()));
    return {x.numel() / width, width};
}

}  // namespace

Var layer_norm(const Var& x, const Var& weight, const Var& bias, float eps) {
    const RowLayout layout = check_layer_norm("layer_norm", x, weight, bias);
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

namespace hnas::ops {

namespace {

// s = residual + branch ⊙ factor over one row, and the row's mask bytes (factor ≠ 0) when dropping.
void sum_row(const float* residual, const float* branch, const KeepFactors* factors, int64_t begin, int64_t width,
             float* s, uint8_t* mask) {
    if (factors == nullptr) {
#pragma omp simd
        for (int64_t j = 0; j < width; ++j) s[j] = residual[j] + branch[j];
        return;
    }
    constexpr int64_t kChunk = 256;
    alignas(64) float factor[kChunk];
    for (int64_t first = 0; first < width; first += kChunk) {
        const int64_t count = std::min(kChunk, width - first);
        factors->fill(begin + first, count, factor);
#pragma omp simd
        for (int64_t j = 0; j < count; ++j) {
            s[first + j] = residual[first + j] + branch[first + j] * factor[j];
            mask[first + j] = factor[j] != 0.0f;
        }
    }
}

// The backward of layer_norm(s), s = residual + branch ⊙ mask/(1 − p), one pass over the rows: each
// row's ds (layer norm's input gradient) goes to the residual as it is and to the branch masked, and
// the row's terms of dw and db into the partial sums, while the row is in cache. Inputs: 0 residual,
// 1 branch, 2 weight, 3 bias. The branch's gradient feeds its linear layer's backward products: under
// bf16 its copy is written in the same pass (FeedsProducts, as in dropout_add).
void dropout_add_layer_norm_backward(const Tensor& sum, const Tensor& weight, const Tensor& mask, float keep_scale,
                                     const Tensor& row_mean, const Tensor& row_rstd, const Tensor& dy,
                                     const RowLayout& l, GradSink& sink) {
    const int64_t width = l.width;
    std::optional<GradSink::Target> to_residual, to_branch;
    if (sink.wants(0)) to_residual.emplace(sink.target(0));
    if (sink.wants(1)) to_branch.emplace(sink.target(1));
    float* d_residual = to_residual ? to_residual->grad.data() : nullptr;
    float* d_branch = to_branch ? to_branch->grad.data() : nullptr;
    uint16_t* d_branch_rounded = to_branch ? backend::operand_copy_to_fill(to_branch->grad) : nullptr;
    const bool residual_accumulates = to_residual && to_residual->accumulate;
    const bool branch_accumulates = to_branch && to_branch->accumulate;
    const bool parameters = sink.wants(2) || sink.wants(3);
    kernels::RowBlockSums sums(l.rows, width, parameters ? 2 : 0);
    const std::array<kernels::RowBlockSums::Total, 2> totals =
        parameters ? parameter_totals(sink, 2, 3) : std::array<kernels::RowBlockSums::Total, 2>{};
    const float *s = sum.data(), *w = weight.data(), *g = dy.data(), *mean = row_mean.data(), *rstd = row_rstd.data();
    const uint8_t* m = mask.defined() ? mask.bytes() : nullptr;
#pragma omp parallel if (l.numel() >= kernels::kParallelGrain)
    {
        std::vector<float> ds(static_cast<size_t>(width));
        float* d = ds.data();
#pragma omp for schedule(static)
        for (int64_t block = 0; block < sums.blocks(); ++block) {
            sums.start_block(block);
            for (int64_t r = sums.first_row(block); r < sums.end_row(block); ++r) {
                const int64_t at = r * width;
                const float *row = s + at, *grow = g + at;
                const RowStatistics st{mean[r], rstd[r]};
                const RowGradientMeans means = row_gradient_means(row, w, grow, st, width);
#pragma omp simd
                for (int64_t j = 0; j < width; ++j) {
                    d[j] = st.rstd * (grow[j] * w[j] - means.dxhat - (row[j] - st.mean) * st.rstd * means.dxhat_xhat);
                }
                if (d_residual) {
#pragma omp simd
                    for (int64_t j = 0; j < width; ++j) write_gradient(d_residual[at + j], d[j], residual_accumulates);
                }
                if (d_branch) {
                    const uint8_t* mrow = m == nullptr ? nullptr : m + at;
#pragma omp simd
                    for (int64_t j = 0; j < width; ++j) {
                        const float factor = mrow == nullptr ? 1.0f : static_cast<float>(mrow[j]) * keep_scale;
                        write_gradient(d_branch[at + j], d[j] * factor, branch_accumulates);
                    }
                    kernels::round_row_to_bf16(d_branch + at,
                                               d_branch_rounded == nullptr ? nullptr : d_branch_rounded + at, width);
                }
                if (parameters) add_parameter_terms(row, grow, st, width, sums, block);
            }
        }
        if (parameters) sums.total(totals);
    }
}

}  // namespace

Var dropout_add_layer_norm(const Var& residual, const Var& branch, float p, Rng& rng, const Var& weight,
                           const Var& bias, float eps) {
    check_dropout_probability("dropout_add_layer_norm", p);
    HNAS_CHECK(residual.shape() == branch.shape(), "dropout_add_layer_norm: residual ", shape_str(residual.shape()),
               " and branch ", shape_str(branch.shape()), " differ");
    const RowLayout layout = check_layer_norm("dropout_add_layer_norm", residual, weight, bias);
    const int64_t width = layout.width;
    const std::optional<KeepFactors> factors = p > 0.0f ? std::optional(KeepFactors::draw(p, rng)) : std::nullopt;
    Tensor sum = Tensor::empty(residual.shape()), y = Tensor::empty(residual.shape());
    Tensor mask = factors ? Tensor::empty(residual.shape(), DType::u8) : Tensor();
    Tensor row_mean = Tensor::empty({layout.rows}), row_rstd = Tensor::empty({layout.rows});
    float* out = y.data();  // before the bf16 copy is claimed, as in layer_norm
    uint16_t* rounded = backend::operand_copy_to_fill(y);
    const float *in = residual.value().data(), *br = branch.value().data(), *w = weight.value().data();
    const float* b = bias.value().data();
    float *s = sum.data(), *mean = row_mean.data(), *rstd = row_rstd.data();
    uint8_t* m = factors ? mask.bytes() : nullptr;
    const KeepFactors* keep = factors ? &*factors : nullptr;
#pragma omp parallel for schedule(static) if (layout.numel() >= kernels::kParallelGrain)
    for (int64_t r = 0; r < layout.rows; ++r) {
        const int64_t at = r * width;
        sum_row(in + at, br + at, keep, at, width, s + at, m == nullptr ? nullptr : m + at);
        const RowStatistics st = row_statistics(s + at, width, eps);
        normalize_row(s + at, w, b, st, width, out + at, rounded == nullptr ? nullptr : rounded + at);
        mean[r] = st.mean;
        rstd[r] = st.rstd;
    }
    const float keep_scale = factors ? factors->keep_scale : 1.0f;
    Tensor wv = weight.value();
    return make_result("dropout_add_layer_norm", y, {residual, branch, weight, bias}, [=](const Tensor& dy, GradSink& sink) {
        dropout_add_layer_norm_backward(sum, wv, mask, keep_scale, row_mean, row_rstd, dy, layout, sink);
    });
}

}  // namespace hnas::ops
