// nap: normalized attention pooling (paper 002, Eq. 1): per query, the scores over the allowed keys
// standardized by their mean and standard deviation, then scaled by a gain and shifted by a bias per
// head (initially 1 and 0). No softmax: weights may be negative and rows need not sum to 1.
#include "nn/attention_norm.h"

namespace hnas::nn {

namespace {

struct NapSettings : KindSettings {
    ops::Standardization form;  // √(variance + eps) or σ + eps as the divisor
};

KindSettingsPtr read_settings(config::ConfigNode& stack) {
    auto settings = std::make_shared<NapSettings>();
    ops::Standardization& form = settings->form;
    form.eps = stack.number("nap_eps", form.eps, "`nap`: the ε of `nap_denominator`", 1e-12, 1.0);
    form.denominator = stack.choice("nap_denominator", form.denominator,
                                    "`nap`: what divides the centred scores: `sqrt_variance_eps` √(var + ε), as layer "
                                    "norm; `std_plus_eps` σ + ε, as paper 002's code computed it (with ε 1e-3)");
    return settings;
}

class Nap : public AttentionNorm {
public:
    Nap(const NapSettings& settings, int64_t heads) : form_(settings.form) {
        gain_ = register_parameter("gain", Tensor::full({heads}, 1.0f), ParameterRole::no_decay);
        bias_ = register_parameter("bias", Tensor::zeros({heads}), ParameterRole::no_decay);
    }
    std::optional<ops::SliceNormalizer> slice_normalizer() const override {
        return ops::standardize_normalizer(gain_, bias_, form_);
    }
    Var normalize(const AttentionScores& in, const ops::AttentionMask& mask) const override {
        return ops::standardize_attention(in.scores, gain_, bias_, mask, form_);
    }
    Var reference(const AttentionScores& in, const ops::AttentionMask& mask) const override {
        const Shape per_head{1, gain_.numel(), 1, 1};
        const Var affine = ops::add(ops::mul(ops::masked_standardize(in.scores, mask, form_), ops::reshape(gain_, per_head)),
                                    ops::reshape(bias_, per_head));
        return ops::mul(affine, Var(ops::allowed_entries(mask, in.scores.shape())));  // Eq. 1, 0 where not allowed
    }
    std::vector<HeadValues> head_values() const override {
        return {{"gain", gain_.value().to_floats()}, {"bias", bias_.value().to_floats()}};
    }

private:
    Var gain_, bias_;  // (H)
    ops::Standardization form_;
};
}  // namespace

const AttentionKind& nap_kind() {
    static const AttentionKind kind{
        .name = "nap",
        .description = "logits standardized per query with a gain and bias per head, no softmax (paper 002)",
        .future_leak = "",
        .rows_sum_to_one = false,
        .compares_templates = false,
        .softmax_of_scores = false,
        .read_settings = read_settings,
        .make = [](const KindSettings& settings, int64_t heads) -> std::unique_ptr<AttentionNorm> {
            return std::make_unique<Nap>(settings_as<NapSettings>(settings, "nap"), heads);
        },
    };
    return kind;
}

}  // namespace hnas::nn
