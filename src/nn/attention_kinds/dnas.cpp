// dnas: doubly-normalized attention (paper 000, Eq. 6-8): exp(S) normalized over the queries of each
// key, then over the keys of each query, i.e. softmax_keys(log_softmax_queries(S)). Every real key
// then gets total weight Σ_i A_ij ≥ 1/L_k (Lemma 1): no key is explained away.
#include "nn/attention_norm.h"

namespace hnas::nn {

namespace {
class Dnas : public AttentionNorm {
public:
    std::optional<ops::SliceNormalizer> slice_normalizer() const override {
        return ops::step_normalizer({ops::NormalizeAxis::queries, ops::NormalizeAxis::keys});
    }
    Var normalize(const AttentionScores& in, const ops::AttentionMask& mask) const override {
        return ops::normalize_attention(in.scores, mask, {ops::NormalizeAxis::queries, ops::NormalizeAxis::keys});
    }
    Var reference(const AttentionScores& in, const ops::AttentionMask& mask) const override {
        const Var over_queries = ops::log_normalize(in.scores, mask, ops::NormalizeAxis::queries);  // Eq. 7
        return ops::masked_exp(ops::log_normalize(over_queries, mask, ops::NormalizeAxis::keys), mask);  // Eq. 8
    }
};
}  // namespace

const AttentionKind& dnas_kind() {
    static const AttentionKind kind{
        .name = "dnas",
        .description = "normalize exp(S) over queries for each key, then over keys (paper 000, Eq. 6-8)",
        .future_leak = kLeaksOverQueries,
        .rows_sum_to_one = true,
        .compares_templates = false,
        .softmax_of_scores = false,
        .read_settings = no_settings,
        .make = [](const KindSettings&, int64_t) -> std::unique_ptr<AttentionNorm> { return std::make_unique<Dnas>(); },
    };
    return kind;
}

}  // namespace hnas::nn
