// lnas: softmax over the keys of each query, A_ij = exp(S_ij) / Σ_j' exp(S_ij') (paper 000, Eq. 1;
// Eq. 3 with uniform priors).
#include "nn/attention_norm.h"

namespace hnas::nn {

namespace {
class Lnas : public AttentionNorm {
public:
    std::optional<ops::SliceNormalizer> slice_normalizer() const override { return ops::step_normalizer({ops::NormalizeAxis::keys}); }
    Var normalize(const AttentionScores& in, const ops::AttentionMask& mask) const override {
        return ops::normalize_attention(in.scores, mask, {ops::NormalizeAxis::keys});
    }
    Var reference(const AttentionScores& in, const ops::AttentionMask& mask) const override {
        return ops::masked_exp(ops::log_normalize(in.scores, mask, ops::NormalizeAxis::keys), mask);
    }
};
}  // namespace

const AttentionKind& lnas_kind() {
    static const AttentionKind kind{
        .name = "lnas",
        .description = "softmax over keys for each query (the standard Transformer)",
        .future_leak = "",
        .rows_sum_to_one = true,
        .compares_templates = false,
        .softmax_of_scores = true,
        .read_settings = no_settings,
        .make = [](const KindSettings&, int64_t) -> std::unique_ptr<AttentionNorm> { return std::make_unique<Lnas>(); },
    };
    return kind;
}

}  // namespace hnas::nn
