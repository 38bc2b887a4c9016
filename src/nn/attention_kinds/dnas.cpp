// dnas: doubly-normalized attention (paper 000, Eq. 6-8): exp(S) normalized over the queries of each
// key, then over the keys of each query, i.e. softmax_keys(log_softmax_queries(S)). Every real key
// then gets total weight Σ_i A_ij ≥ 1/L_k (Lemma 1): no key is explained away.
#include "nn/attention_norm.h"

namespace hnas::nn {

namespace {
class Dnas : public AttentionNorm {
public:
    Var normalize(const AttentionScores& in, const ops::AttentionMask& mask) const override {
        return ops::normalize_attention(in.scores, mask, {ops::NormalizeAxis::queries, ops::NormalizeAxis::keys});
    }
    Var reference(const AttentionScores& in, const ops::AttentionMask& mask) const override {
        const Var over_queries = ops::log_normalize(in.scores, mask, ops::NormalizeAxis::queries);  // Eq. 7
        return ops::masked_exp(ops::log_normalize(over_queries, mask, ops::NormalizeAxis::keys), mask);  // Eq. 8
    }
};
}  // namespace

std::unique_ptr<AttentionNorm> make_dnas(const AttentionNormOptions&) { return std::make_unique<Dnas>(); }

}  // namespace hnas::nn
