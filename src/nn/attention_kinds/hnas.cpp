// hnas: the hybrid A = u·A_dnas + (1−u)·A_lnas with u = sigmoid(θ), one θ per head (paper 004, Alg. 1)
// or one per layer (paper 000 §6), initialized so every head starts at u = hybrid_init (the papers used
// 0.5 and, for headlines, 0.1).
#include <cmath>

#include <fmt/format.h>

#include "nn/attention_norm.h"

namespace hnas::nn {

namespace {

// One trainable u per head (paper 004, Eq. 12) or one per layer, shared by its heads (paper 000 §6: "a
// trainable variable u_l").
enum class HybridPer { head, layer };
constexpr EnumName<HybridPer> kHybridPerNames[]{{HybridPer::head, "head"}, {HybridPer::layer, "layer"}};
constexpr const auto& enum_names(HybridPer) { return kHybridPerNames; }

struct HnasSettings : KindSettings {
    float hybrid_init = 0.5f;  // the initial u = sigmoid(θ) of every head, in (0, 1)
    HybridPer hybrid_per = HybridPer::head;

    // LAMB's trust ratio scales θ's step by |θ|: a θ that starts near 0 barely moves.
    std::optional<std::string> trust_ratio_warning(const std::string& stack) const override {
        const double u = hybrid_init, theta = std::log(u / (1.0 - u));
        if (std::fabs(theta) >= 0.5) return std::nullopt;  // |θ| ≥ 0.5: the ratio lets it move at about lr·|θ| a step
        return fmt::format(
            "train.optimizer lamb scales each tensor's step by its norm, and hnas's gate θ = logit({}.hybrid_init {}) = {:.3f} "
            "starts near 0, where that trust ratio holds it: u will barely move (a θ taken from init_from starts where that "
            "checkpoint left it). lamb_albert (paper 004's LAMB) leaves the gates out of the ratio",
            stack, u, theta);
    }
};

KindSettingsPtr read_settings(config::ConfigNode& stack) {
    auto settings = std::make_shared<HnasSettings>();
    // hybrid_init is a probability u; 0 and 1 would need an infinite θ.
    settings->hybrid_init = stack.number("hybrid_init", settings->hybrid_init,
                                         "`hnas`: the initial u of every head (the papers used 0.5, and 0.1 for headlines)",
                                         1e-6, 1.0 - 1e-6);
    settings->hybrid_per = stack.choice("hybrid_per", settings->hybrid_per,
                                        "`hnas`: one trainable u per `head` (paper 004, Eq. 12) or per `layer`, shared by its "
                                        "heads (paper 000 §6)");
    return settings;
}

class Hnas : public AttentionNorm {
public:
    Hnas(const HnasSettings& settings, int64_t heads) : heads_(heads) {
        const float u = settings.hybrid_init;
        HNAS_CHECK(u > 0.0f && u < 1.0f, "hnas: hybrid_init must be in (0, 1), got ", u);
        const int64_t thetas = settings.hybrid_per == HybridPer::layer ? 1 : heads;
        theta_ = register_parameter("hybrid_theta", Tensor::full({thetas}, std::log(u / (1.0f - u))), ParameterRole::hybrid_gate);
    }
    std::optional<ops::SliceNormalizer> slice_normalizer() const override { return ops::hybrid_normalizer(theta_per_head()); }
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

const AttentionKind& hnas_kind() {
    static const AttentionKind kind{
        .name = "hnas",
        .description = "u·DNAS + (1−u)·LNAS with a trainable u per head (paper 004)",
        .future_leak = kLeaksOverQueries,
        .rows_sum_to_one = true,
        .compares_templates = false,
        .softmax_of_scores = false,
        .read_settings = read_settings,
        .make = [](const KindSettings& settings, int64_t heads) -> std::unique_ptr<AttentionNorm> {
            return std::make_unique<Hnas>(settings_as<HnasSettings>(settings, "hnas"), heads);
        },
    };
    return kind;
}

}  // namespace hnas::nn
