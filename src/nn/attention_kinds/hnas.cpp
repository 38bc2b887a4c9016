// hnas: the hybrid A = u·A_dnas + (1−u)·A_lnas with u = sigmoid(θ), one θ per head (paper 004, Alg. 1)
// or one per layer (paper 000 §6), initialized so every head starts at u = hybrid_init (the papers used
// 0.5 and, for headlines, 0.1).
#include <cmath>

#include "nn/attention_norm.h"

namespace hnas::nn {

namespace {
class Hnas : public AttentionNorm {
public:
    explicit Hnas(const AttentionNormOptions& options) : heads_(options.heads) {
        const float u = options.hybrid_init;
        HNAS_CHECK(u > 0.0f && u < 1.0f, "hnas: hybrid_init must be in (0, 1), got ", u);
        const int64_t thetas = options.hybrid_per == HybridPer::layer ? 1 : options.heads;
        theta_ = register_parameter("hybrid_theta", Tensor::full({thetas}, std::log(u / (1.0f - u))));
    }
    Var normalize(const AttentionScores& in, const ops::AttentionMask& mask) const override {
        return ops::hybrid_attention(in.scores, theta_per_head(), mask);
    }
    Var reference(const AttentionScores& in, const ops::AttentionMask& mask) const override {
        using ops::NormalizeAxis;
        const Var u = ops::reshape(ops::sigmoid(theta_per_head()), {1, heads_, 1, 1});
        const Var lnas = ops::masked_exp(ops::log_normalize(in.scores, mask, NormalizeAxis::keys), mask);
        const Var dnas = ops::masked_exp(
            ops::log_normalize(ops::log_normalize(in.scores, mask, NormalizeAxis::queries), mask, NormalizeAxis::keys), mask);
        return ops::add(lnas, ops::mul(u, ops::sub(dnas, lnas)));  // u·DNAS + (1 − u)·LNAS
    }
    std::vector<HeadValues> head_values() const override {
        HeadValues u{"u", {}};
        for (int64_t h = 0; h < theta_.numel(); ++h) u.values.push_back(1.0f / (1.0f + std::exp(-theta_.value().data()[h])));
        return {u};
    }

private:
    // θ for each head: a layer's one θ broadcast to its heads, whose gradients the broadcast sums back.
    Var theta_per_head() const {
        return theta_.numel() == heads_ ? theta_ : ops::add(theta_, Var(Tensor::zeros({heads_})));
    }

    int64_t heads_;
    Var theta_;  // (H), or (1) with hybrid_per layer
};
}  // namespace

std::unique_ptr<AttentionNorm> make_hnas(const AttentionNormOptions& options) { return std::make_unique<Hnas>(options); }

}  // namespace hnas::nn
