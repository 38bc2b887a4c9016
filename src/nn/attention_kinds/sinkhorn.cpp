// sinkhorn: k Sinkhorn iterations in log space, each a normalization over the queries of every key and
// then over the keys of every query; it starts on the query axis and ends on the key axis, so rows sum
// to 1 and k = 1 is dnas. As k grows, the column sums approach L_q / L_k (doubly stochastic up to scale).
#include "nn/attention_norm.h"

namespace hnas::nn {

namespace {
class Sinkhorn : public AttentionNorm {
public:
    explicit Sinkhorn(int iterations) {
        HNAS_CHECK(iterations >= 1, "sinkhorn: iterations must be at least 1, got ", iterations);
        for (int k = 0; k < iterations; ++k) {
            steps_.push_back(ops::NormalizeAxis::queries);
            steps_.push_back(ops::NormalizeAxis::keys);
        }
    }
    Var normalize(const AttentionScores& in, const ops::AttentionMask& mask) const override {
        return ops::normalize_attention(in.scores, mask, steps_);
    }
    Var reference(const AttentionScores& in, const ops::AttentionMask& mask) const override {
        Var L = in.scores;
        for (ops::NormalizeAxis axis : steps_) L = ops::log_normalize(L, mask, axis);
        return ops::masked_exp(L, mask);
    }

private:
    std::vector<ops::NormalizeAxis> steps_;
};
}  // namespace

std::unique_ptr<AttentionNorm> make_sinkhorn(const AttentionNormOptions& options) {
    return std::make_unique<Sinkhorn>(options.iterations);
}

}  // namespace hnas::nn
