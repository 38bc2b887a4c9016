// standardize_attention: normalized attention pooling (paper 002, Eq. 1), per query the allowed scores
// standardized with their mean and biased variance, then gain[h]·z + bias[h]. Its composed definition
// is the nap kind's reference().
#include <algorithm>
#include <cmath>
#include <utility>
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
                                             const SliceMask& allowed, const AttentionDims& d, float* dS) {
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
            dS[row + j] = value;
        }
    }
    return parts;
}

// NAP's kernels slice by slice: each query's statistics kept for the backward, which also reads the
// scores (where the caller keeps them, or a copy), with the slice's terms of dgain and dbias.
class StandardizeNormalization final : public SliceNormalization {
public:
    StandardizeNormalization(const AttentionDims& d, const Tensor& gain, const Tensor& bias, const Standardization& form,
                             const KeptAttention& kept)
        : SliceNormalization(d),
          gain_(gain.to_floats()),
          bias_(bias.to_floats()),
          form_(form),
          kept_scores_(kept.scores.defined() ? kept.scores : Tensor::empty({d.slices(), d.slice()})),
          own_(kept.scores.defined() ? nullptr : kept_scores_.data()),
          scores_(std::as_const(kept_scores_).data()),
          stats_(static_cast<size_t>(d.slices() * d.queries)),
          dgain_(static_cast<size_t>(d.slices())),
          dbias_(static_cast<size_t>(d.slices())) {}

    void forward(int64_t s, const float* S, const SliceMask& mask, float* A, SliceScratch&) override {
        const int64_t n = dims.slice();
        if (own_ && S != own_ + s * n) std::copy_n(S, n, own_ + s * n);
        const auto h = static_cast<size_t>(s % dims.heads);
        standardize_attention_forward(S, mask, dims, gain_[h], bias_[h], form_, A, stats(s));
    }
    const float* weights(int64_t s, const SliceMask& mask, float* A, SliceScratch& scratch) override {
        forward(s, scores_ + s * dims.slice(), mask, A, scratch);  // the same statistics again
        return A;
    }
    void backward(int64_t s, const float* g, const SliceMask& mask, float* dS, SliceScratch&) override {
        const HeadGradients parts = standardize_attention_backward(scores_ + s * dims.slice(), g, stats(s),
                                                                   gain_[static_cast<size_t>(s % dims.heads)], mask, dims, dS);
        dgain_[static_cast<size_t>(s)] = parts.gain;
        dbias_[static_cast<size_t>(s)] = parts.bias;
    }
    void write_parameter_gradients(GradSink& sink, size_t first) const override {
        add_head_gradient(sink, first, dgain_, dims);
        add_head_gradient(sink, first + 1, dbias_, dims);
    }

private:
    RowStatistics* stats(int64_t s) { return stats_.data() + s * dims.queries; }

    std::vector<float> gain_, bias_;
    Standardization form_;
    Tensor kept_scores_;  // the caller's scores, or a copy
    float* own_;          // the copy's values, when it is one
    const float* scores_;
    std::vector<RowStatistics> stats_;
    std::vector<double> dgain_, dbias_;
};

}  // namespace

SliceNormalizer standardize_normalizer(const Var& gain, const Var& bias, const Standardization& form) {
    return {[gain = gain.value(), bias = bias.value(), form](const AttentionDims& d,
                                                               const KeptAttention& kept) -> std::unique_ptr<SliceNormalization> {
                HNAS_CHECK(gain.shape() == Shape{d.heads} && bias.shape() == Shape{d.heads}, "standardize_attention: gain ",
                           shape_str(gain.shape()), " and bias ", shape_str(bias.shape()), " must be (", d.heads, ")");
                return std::make_unique<StandardizeNormalization>(d, gain, bias, form, kept);
            },
            {gain, bias}};
}

Var standardize_attention(const Var& scores, const Var& gain, const Var& bias, const AttentionMask& mask,
                          const Standardization& form) {
    return normalize_slices("standardize_attention", scores, mask, standardize_normalizer(gain, bias, form));
}

}  // namespace hnas::ops
