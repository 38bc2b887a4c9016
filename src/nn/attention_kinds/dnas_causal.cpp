// dnas_causal: doubly-normalized attention that never looks ahead. For query i and key j the
// query-axis normalizer of key j runs over the queries i' ≤ i only (a prefix logsumexp down the query
// axis; in causal self-attention that is queries j..i), then weights are normalized over keys. Query i's
// weights depend on queries ≤ i alone, so training matches step-by-step decoding, where the prefix
// logsumexp of every key is carried from step to step (normalize_step).
#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "nn/attention_norm.h"

namespace hnas::nn {

namespace {

constexpr float kMinusInfinity = -std::numeric_limits<float>::infinity();

// log(exp(a) + exp(b)) where a may be -inf (no earlier query yet).
float log_add_exp(float a, float b) {
    if (a == kMinusInfinity) return b;
    const float top = std::max(a, b);
    return top + std::log1p(std::exp(-std::abs(a - b)));
}

class DnasCausal : public AttentionNorm {
public:
    std::optional<ops::SliceNormalizer> slice_normalizer() const override {
        return ops::step_normalizer({ops::NormalizeAxis::queries_prefix, ops::NormalizeAxis::keys});
    }
    Var normalize(const AttentionScores& in, const ops::AttentionMask& mask) const override {
        return ops::normalize_attention(in.scores, mask, {ops::NormalizeAxis::queries_prefix, ops::NormalizeAxis::keys});
    }
    Var reference(const AttentionScores& in, const ops::AttentionMask& mask) const override {
        const Var over_earlier_queries = ops::log_normalize(in.scores, mask, ops::NormalizeAxis::queries_prefix);
        return ops::masked_exp(ops::log_normalize(over_earlier_queries, mask, ops::NormalizeAxis::keys), mask);
    }

    // `state` (B, H, Lk') holds, for every key seen so far, the logsumexp of its scores over the earlier
    // queries (-inf for none); keys beyond Lk' are new (causal self-attention grows by one per step).
    Var normalize_step(const AttentionScores& in, const ops::AttentionMask& mask, Tensor& state) const override {
        const Var& scores = in.scores;
        HNAS_CHECK(scores.rank() == 4 && scores.dim(2) == 1, "dnas_causal step: scores must be (B, H, 1, Lk), got ",
                   shape_str(scores.shape()));
        const int64_t batch = scores.dim(0), heads = scores.dim(1), keys = scores.dim(3);
        const int64_t seen = state.defined() ? state.dim(2) : 0;
        HNAS_CHECK(!state.defined() || (state.dim(0) == batch && state.dim(1) == heads && seen <= keys),
                   "dnas_causal step: state ", shape_str(state.shape()), " does not match scores ",
                   shape_str(scores.shape()));
        Tensor normalizers = Tensor::full({batch, heads, keys}, kMinusInfinity);
        Tensor weights = Tensor::zeros({batch, heads, 1, keys});
        std::vector<float> log_weights(static_cast<size_t>(keys));
        for (int64_t b = 0; b < batch; ++b) {
            const bool query_real = !mask.query_valid.defined() || mask.query_valid.data()[b] > 0.5f;
            for (int64_t h = 0; h < heads; ++h) {
                const int64_t slice = b * heads + h;
                const float* row = scores.value().data() + slice * keys;
                float* normalizer = normalizers.data() + slice * keys;
                if (seen > 0) std::copy_n(state.data() + slice * seen, seen, normalizer);
                if (!query_real) continue;
                // Eq. 6 with the query sum cut at this query: fold its score into each allowed key's
                // normalizer, then Eq. 7 over the allowed keys.
                float top = kMinusInfinity;
                for (int64_t j = 0; j < keys; ++j) {
                    const bool allowed = (!mask.key_valid.defined() || mask.key_valid.data()[b * keys + j] > 0.5f) &&
                                         (!mask.causal || j <= mask.query_offset);
                    log_weights[static_cast<size_t>(j)] = kMinusInfinity;
                    if (!allowed) continue;
                    normalizer[j] = log_add_exp(normalizer[j], row[j]);
                    log_weights[static_cast<size_t>(j)] = row[j] - normalizer[j];
                    top = std::max(top, log_weights[static_cast<size_t>(j)]);
                }
                if (top == kMinusInfinity) continue;  // nothing allowed: a zero row
                float* out = weights.data() + slice * keys;
                double total = 0.0;
                for (int64_t j = 0; j < keys; ++j) {
                    out[j] = std::exp(log_weights[static_cast<size_t>(j)] - top);
                    total += out[j];
                }
                for (int64_t j = 0; j < keys; ++j) out[j] = static_cast<float>(out[j] / total);
            }
        }
        state = normalizers;
        return Var(weights);
    }
};

}  // namespace

const AttentionKind& dnas_causal_kind() {
    static const AttentionKind kind{
        .name = "dnas_causal",
        .description = "DNAS whose query-axis normalizer of query i runs over queries ≤ i only",
        .future_leak = "",
        .rows_sum_to_one = true,
        .compares_templates = false,
        .softmax_of_scores = false,
        .read_settings = no_settings,
        .make = [](const KindSettings&, int64_t) -> std::unique_ptr<AttentionNorm> { return std::make_unique<DnasCausal>(); },
    };
    return kind;
}

}  // namespace hnas::nn
