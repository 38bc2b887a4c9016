// standardize_attention: normalized attention pooling (paper 002, Eq. 1), per query the allowed scores
// standardized with their mean and biased variance, then gain[h]·z + bias[h]. Its composed definition
// is the nap kind's reference().
#include <cmath>
#include <vector>

#include "ops/attention_slices.h"

namespace hnas::ops {

namespace {

// Per query row, what the backward needs of the forward: μ, r (the factor z = (S − μ)·r) and the
// coefficient c of z in the variance term of the adjoint (see the backward).
struct RowStatistics {
    float mean = 0.0f, r = 0.0f, c = 0.0f;
};

// One slice: out = gain·z + bias over allowed entries (0 elsewhere), z = (S − μ)·r per query, with
// r = 1/√(var + eps) or 1/(σ + eps) (form.denominator); every statistic 0 for a query with nothing allowed.
void standardize_attention_forward(const float* S, const SliceMask& allowed, const AttentionDims& d, float gain,
                                   float bias, const Standardization& form, float* out, RowStatistics* row_stats) {
    for (int64_t i = 0; i < d.queries; ++i) {
        const float* row = S + i * d.keys;
        float* out_row = out + i * d.keys;
        double total = 0.0;
        int64_t count = 0;
        for (int64_t j = 0; j < d.keys; ++j)
            if (allowed.allowed(i, j)) total += row[j], ++count;
        row_stats[i] = {};
        if (count == 0) {
            std::fill(out_row, out_row + d.keys, 0.0f);
            continue;
        }
        const float mu = static_cast<float>(total / static_cast<double>(count));
        double squares = 0.0;
        for (int64_t j = 0; j < d.keys; ++j)
            if (allowed.allowed(i, j)) squares += (row[j] - mu) * (row[j] - mu);
        const float variance = static_cast<float>(squares / static_cast<double>(count));
        float r = 0.0f, c = 0.0f;
        if (form.denominator == StandardizeDenominator::sqrt_variance_eps) {
            r = 1.0f / std::sqrt(variance + form.eps);
            c = 1.0f;
        } else {
            const float sigma = std::sqrt(variance);
            r = 1.0f / (sigma + form.eps);
            c = sigma > 0.0f ? (sigma + form.eps) / sigma : 0.0f;  // σ = 0: z = 0, and |·|'s subgradient 0
        }
        for (int64_t j = 0; j < d.keys; ++j) out_row[j] = allowed.allowed(i, j) ? gain * (row[j] - mu) * r + bias : 0.0f;
        row_stats[i] = {mu, r, c};
    }
}

struct HeadGradients {
    double gain = 0.0, bias = 0.0;
};

// One slice: dS into `dS` (null: not wanted) and the slice's parts of dgain and dbias.
HeadGradients standardize_attention_backward(const float* S, const float* g, const RowStatistics* row_stats, float gain,
                                             const SliceMask& allowed, const AttentionDims& d, float* dS, bool accumulate) {
    HeadGradients parts;
    for (int64_t i = 0; i < d.queries; ++i) {
        const int64_t row = i * d.keys;
        const auto [mean, r, c] = row_stats[i];
        double sum_dz = 0.0, sum_dz_z = 0.0;
        int64_t count = 0;
        for (int64_t j = 0; j < d.keys; ++j) {
            if (!allowed.allowed(i, j)) continue;
            const float z = (S[row + j] - mean) * r;
            // forward: out = gain·z + bias, so dz = g·gain, dgain = Σ g ⊙ z, dbias = Σ g
            sum_dz += g[row + j] * gain;
            sum_dz_z += g[row + j] * gain * z;
            parts.gain += g[row + j] * z;
            parts.bias += g[row + j];
            ++count;
        }
        if (!dS) continue;
        // A row of one allowed key standardizes to z = 0 whatever its score, so its gradient is exactly
        // 0; the general formula would leave the rounding of dz − mean(dz) (a contracted multiply-add)
        // times r, up to 1/√eps.
        const bool constant = count <= 1;
        const float mean_dz = constant ? 0.0f : static_cast<float>(sum_dz / static_cast<double>(count));
        const float mean_dz_z = constant ? 0.0f : static_cast<float>(sum_dz_z / static_cast<double>(count));
        for (int64_t j = 0; j < d.keys; ++j) {
            // forward: z = (S − μ)·r over allowed keys; as layer norm,
            // dS = r·(dz − mean(dz) − c·z·mean(dz ⊙ z)), c = 1 for r = 1/√(var + eps), (σ + eps)/σ for 1/(σ + eps)
            float value = 0.0f;
            if (allowed.allowed(i, j) && !constant) {
                const float z = (S[row + j] - mean) * r;
                value = r * (g[row + j] * gain - mean_dz - c * z * mean_dz_z);
            }
            write_gradient(dS[row + j], value, accumulate);
        }
    }
    return parts;
}

}  // namespace

Var standardize_attention(const Var& scores, const Var& gain, const Var& bias, const AttentionMask& mask,
                          const Standardization& form) {
    const AttentionDims d = check_attention_shapes(scores, mask, "standardize_attention");
    HNAS_CHECK(gain.shape() == Shape{d.heads} && bias.shape() == Shape{d.heads}, "standardize_attention: gain ",
               shape_str(gain.shape()), " and bias ", shape_str(bias.shape()), " must be (", d.heads, ")");
    Tensor weights = Tensor::empty(scores.shape());
    std::vector<RowStatistics> stats(static_cast<size_t>(d.slices() * d.queries));  // per (slice, query)
    const int64_t n = d.slice();
    const Tensor S = scores.value(), g = gain.value(), b = bias.value();
    for_each_slice(d, [&](int64_t s, SliceScratch&) {
        const int64_t h = s % d.heads;
        standardize_attention_forward(S.data() + s * n, SliceMask(mask, d, s / d.heads), d, g.data()[h], b.data()[h], form,
                                      weights.data() + s * n, stats.data() + s * d.queries);
    });
    return make_result("standardize_attention", weights, {scores, gain, bias},
                       [=, stats = std::move(stats)](const Tensor& dy, GradSink& sink) {
        std::vector<double> dgain(static_cast<size_t>(d.slices())), dbias(static_cast<size_t>(d.slices()));
        WantedGradient dscores = wanted_gradient(sink, 0);
        for_each_slice(d, [&](int64_t s, SliceScratch&) {
            const HeadGradients parts = standardize_attention_backward(
                S.data() + s * n, dy.data() + s * n, stats.data() + s * d.queries, g.data()[s % d.heads], SliceMask(mask, d, s / d.heads), d,
                dscores.slice(s, n), dscores.accumulate);
            dgain[static_cast<size_t>(s)] = parts.gain;
            dbias[static_cast<size_t>(s)] = parts.bias;
        });
        add_head_gradient(sink, 1, dgain, d);
        add_head_gradient(sink, 2, dbias, d);
    });
}

}  // namespace hnas::ops
