// nap: normalized attention pooling (paper 002, Eq. 1): per query, the scores over the allowed keys
// standardized by their mean and standard deviation, then scaled by a gain and shifted by a bias per
// head (initially 1 and 0). No softmax: weights may be negative and rows need not sum to 1.
#include "nn/attention_norm.h"

namespace hnas::nn {

namespace {
class Nap : public AttentionNorm {
public:
    explicit Nap(const AttentionNormOptions& options) : form_(options.nap) {
        gain_ = register_parameter("gain", Tensor::full({options.heads}, 1.0f));
        bias_ = register_parameter("bias", Tensor::zeros({options.heads}));
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

std::unique_ptr<AttentionNorm> make_nap(const AttentionNormOptions& options) { return std::make_unique<Nap>(options); }

}  // namespace hnas::nn
