// non: no online logit normalization (paper 002, §4 "NON"): the scores themselves are the weights,
// scaled by 1/√n for a query with n allowed keys, so that at initialization the output's contribution
// does not depend on the sequence length. Paper 002's block then applies GELU to the heads' output
// in place of its layer norm (model.mte_attention_norm false). Its fused kernel is
// ops/unnormalized_attention.cpp.
#include <cmath>
#include <numeric>

#include "nn/attention_norm.h"

namespace hnas::nn {

namespace {

// (B, 1, Lq, Lk): 1/√n at the n allowed keys of each query, 0 elsewhere.
Tensor scaled_allowed_entries(const ops::AttentionMask& mask, const Shape& scores) {
    Tensor weights = ops::allowed_entries(mask, scores);
    const int64_t keys = weights.dim(3);
    for (int64_t row = 0; keys > 0 && row < weights.numel() / keys; ++row) {
        float* entries = weights.data() + row * keys;
        const float count = std::accumulate(entries, entries + keys, 0.0f);  // of 0/1 entries: exact
        const float scale = count > 0.0f ? 1.0f / std::sqrt(count) : 0.0f;
        for (int64_t j = 0; j < keys; ++j) entries[j] *= scale;
    }
    return weights;
}

class Non : public AttentionNorm {
public:
    std::optional<ops::SliceNormalizer> slice_normalizer() const override { return ops::unnormalized_normalizer(); }
    Var normalize(const AttentionScores& in, const ops::AttentionMask& mask) const override {
        return ops::unnormalized_attention(in.scores, mask);
    }
    Var reference(const AttentionScores& in, const ops::AttentionMask& mask) const override {
        return ops::mul(in.scores, Var(scaled_allowed_entries(mask, in.scores.shape())));
    }
};

}  // namespace

const AttentionKind& non_kind() {
    static const AttentionKind kind{
        .name = "non",
        .description = "the scores as weights, times 1/√(allowed keys): no normalization (paper 002, NON)",
        .future_leak = "",
        .rows_sum_to_one = false,
        .compares_templates = false,
        .softmax_of_scores = false,
        .read_settings = no_settings,
        .make = [](const KindSettings&, int64_t) -> std::unique_ptr<AttentionNorm> { return std::make_unique<Non>(); },
    };
    return kind;
}

}  // namespace hnas::nn
