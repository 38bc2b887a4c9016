// standardize_attention: normalized attention pooling (paper 002, Eq. 1), per query the allowed scores
// standardized with their mean and biased variance, then gain[h]·z + bias[h]. Its composed definition
// is the nap kind's reference().
#include <cmath>

#include "ops/attention_slices.h"

namespace hnas::ops {

namespace {

// One slice: out = gain·z + bias over allowed entries (0 elsewhere), z = (S − μ)·rstd per query, with
// μ and rstd = 1/√(var + eps) kept per query (0 for a query with nothing allowed).
void standardize_attention_forward(const float* S, const SliceMask& allowed, const AttentionDims& d, float gain,
                                   float bias, float eps, float* out, float* mean, float* rstd) {
    for (int64_t i = 0; i < d.queries; ++i) {
        const float* row = S + i * d.keys;
        float* out_row = out + i * d.keys;
        double total = 0.0;
        int64_t count = 0;
        for (int64_t j = 0; j < d.keys; ++j)
            if (allowed.allowed(i, j)) total += row[j], ++count;
        mean[i] = rstd[i] = 0.0f;
        if (count == 0) {
            std::fill(out_row, out_row + d.keys, 0.0f);
            continue;
        }
        const float mu = static_cast<float>(total / static_cast<double>(count));
        double squares = 0.0;
        for (int64_t j = 0; j < d.keys; ++j)
            if (allowed.allowed(i, j)) squares += (row[j] - mu) * (row[j] - mu);
        const float r = 1.0f / std::sqrt(static_cast<float>(squares / static_cast<double>(count)) + eps);
        for (int64_t j = 0; j < d.keys; ++j) out_row[j] = allowed.allowed(i, j) ? gain * (row[j] - mu) * r + bias : 0.0f;
        mean[i] = mu;
        rstd[i] = r;
    }
}

struct HeadGradients {
    double gain = 0.0, bias = 0.0;
};

// One slice: dS into `dS` (null: not wanted) and the slice's parts of dgain and dbias.
HeadGradients standardize_attention_backward(const float* S, const float* g, const float* mean, const float* rstd,
                                             float gain, const SliceMask& allowed, const AttentionDims& d, float* dS,
                                             bool accumulate) {
    HeadGradients parts;
    for (int64_t i = 0; i < d.queries; ++i) {
        const int64_t row = i * d.keys;
        double sum_dz = 0.0, sum_dz_z = 0.0;
        int64_t count = 0;
        for (int64_t j = 0; j < d.keys; ++j) {
            if (!allowed.allowed(i, j)) continue;
            const float z = (S[row + j] - mean[i]) * rstd[i];
            // forward: out = gain·z + bias, so dz = g·gain, dgain = Σ g ⊙ z, dbias = Σ g
            sum_dz += g[row + j] * gain;
            sum_dz_z += g[row + j] * gain * z;
            parts.gain += g[row + j] * z;
            parts.bias += g[row + j];
            ++count;
        }
        if (!dS) continue;
        const float mean_dz = count ? static_cast<float>(sum_dz / static_cast<double>(count)) : 0.0f;
        const float mean_dz_z = count ? static_cast<float>(sum_dz_z / static_cast<double>(count)) : 0.0f;
        for (int64_t j = 0; j < d.keys; ++j) {
            // forward: z = (S − μ)·rstd over allowed keys, as layer norm: dS = rstd·(dz − mean(dz) − z·mean(dz ⊙ z))
            float value = 0.0f;
            if (allowed.allowed(i, j)) {
                const float z = (S[row + j] - mean[i]) * rstd[i];
                value = rstd[i] * (g[row + j] * gain - mean_dz - z * mean_dz_z);
            }
            write_gradient(dS[row + j], value, accumulate);
        }
    }
    return parts;
}

}  // namespace

Var standardize_attention(const Var& scores, const Var& gain, const Var& bias, const AttentionMask& mask, float eps) {
    const AttentionDims d = check_attention_shapes(scores, mask, "standardize_attention");
    HNAS_CHECK(gain.shape() == Shape{d.heads} && bias.shape() == Shape{d.heads}, "standardize_attention: gain ",
               shape_str(gain.shape()), " and bias ", shape_str(bias.shape()), " must be (", d.heads, ")");
    Tensor weights = Tensor::empty(scores.shape());
    Tensor row_mean = Tensor::empty({d.slices(), d.queries}), row_rstd = Tensor::empty({d.slices(), d.queries});
    const int64_t n = d.slice();
    const Tensor S = scores.value(), g = gain.value(), b = bias.value();
    for_each_slice(d, [&](int64_t s, SliceScratch&) {
        const int64_t h = s % d.heads;
        standardize_attention_forward(S.data() + s * n, SliceMask(mask, d, s / d.heads), d, g.data()[h], b.data()[h], eps,
                                      weights.data() + s * n, row_mean.data() + s * d.queries, row_rstd.data() + s * d.queries);
    });
    return make_result("standardize_attention", weights, {scores, gain, bias}, [=](const Tensor& dy, GradSink& sink) {
        std::vector<double> dgain(static_cast<size_t>(d.slices())), dbias(static_cast<size_t>(d.slices()));
        WantedGradient dscores = wanted_gradient(sink, 0);
        for_each_slice(d, [&](int64_t s, SliceScratch&) {
            const HeadGradients parts = standardize_attention_backward(
                S.data() + s * n, dy.data() + s * n, row_mean.data() + s * d.queries, row_rstd.data() + s * d.queries,
                g.data()[s % d.heads], SliceMask(mask, d, s / d.heads), d, dscores.slice(s, n), dscores.accumulate);
            dgain[static_cast<size_t>(s)] = parts.gain;
            dbias[static_cast<size_t>(s)] = parts.bias;
        });
        add_head_gradient(sink, 1, dgain, d);
        add_head_gradient(sink, 2, dbias, d);
    });
}

}  // namespace hnas::ops
