// dnas_causal: doubly-normalized attention that never looks ahead. For query i and key j the
// query-axis normalizer of key j runs over the queries i' ≤ i only (a prefix logsumexp down the query
// axis; in causal self-attention that is queries j..i), then weights are normalized over keys. Query i's
// weights depend on queries ≤ i alone, so training matches step-by-step decoding.
#include "nn/attention_norm.h"

namespace hnas::nn {

namespace {
class DnasCausal : public AttentionNorm {
public:
    Var normalize(const Var& scores, const ops::AttentionMask& mask) const override {
        return ops::normalize_attention(scores, mask, {ops::NormalizeAxis::queries_prefix, ops::NormalizeAxis::keys});
    }
};
}  // namespace

std::unique_ptr<AttentionNorm> make_dnas_causal(const AttentionNormOptions&) { return std::make_unique<DnasCausal>(); }

}  // namespace hnas::nn
