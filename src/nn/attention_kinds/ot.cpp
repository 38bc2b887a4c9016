// ot: paper 003's optimal-transport attention (§9, Eq. 25). The templates are the heads' keys (the
// space in which the scores already compare a query's evidence z with each template), the cost is the
// paper's M(a, b) = −⟨a, b⟩ + C, and γ is the inverse of the score scale (√K, the head width, by
// default: the paper's γ = √(hidden size) for per-head templates), so that
//   S = α⟨k_t, q_i⟩/γ = scores   and   G = ⟨k_t, k_j⟩/γ = similarity,
// both as MultiHeadAttention computes them (with the stack's α in the scores). u is the prior (uniform
// without one) over the input templates; a template of an extra set (keys beyond the input's) takes
// weight through G alone.
#include "nn/attention_norm.h"

namespace hnas::nn {

namespace {
class Ot : public AttentionNorm {
public:
    Var normalize(const AttentionScores& in, const ops::AttentionMask& mask) const override {
        check_similarity(in);
        return ops::ot_attention(in.scores, in.similarity, in.log_preference, mask);
    }
    Var reference(const AttentionScores& in, const ops::AttentionMask& mask) const override {
        check_similarity(in);
        return ops::ot_attention_reference(in.scores, in.similarity, in.log_preference, mask);
    }

private:
    static void check_similarity(const AttentionScores& in) {
        HNAS_CHECK(in.similarity.defined(), "ot: needs the templates' similarity beside the scores, which MultiHeadAttention ",
                   "computes for kinds that compare templates");
    }
};
}  // namespace

const AttentionKind& ot_kind() {
    static const AttentionKind kind{
        .name = "ot",
        .description = "optimal-transport attention over the template set, each template weighted through its similarity to the "
                       "input's (paper 003, Eq. 25)",
        .future_leak = "each query's weights spread over every template, later positions included (a leak of the future)",
        .rows_sum_to_one = true,
        .compares_templates = true,
        .softmax_of_scores = false,
        .read_settings = no_settings,
        .make = [](const KindSettings&, int64_t) -> std::unique_ptr<AttentionNorm> { return std::make_unique<Ot>(); },
    };
    return kind;
}

}  // namespace hnas::nn
