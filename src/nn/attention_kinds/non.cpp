// non: no online logit normalization (paper 002, §4 "NON"): the scores themselves are the weights,
// scaled by 1/√n for a query with n allowed keys, so that at initialization the output's contribution
// does not depend on the sequence length. Paper 002's block then applies GELU to the heads' output
// in place of its layer norm (model.mte_attention_norm false). No fused kernel: the composed form is
// two elementwise products.
#include <cmath>

#include "nn/attention_norm.h"

namespace hnas::nn {

namespace {

// (B, 1, Lq, 1): 1/√(allowed keys of each query), 1 for a query with none (its weights are all 0).
Tensor inverse_sqrt_key_counts(const Tensor& allowed) {
    const int64_t batch = allowed.dim(0), queries = allowed.dim(2), keys = allowed.dim(3);
    Tensor scale = Tensor::empty({batch, 1, queries, 1});
    for (int64_t row = 0; row < batch * queries; ++row) {
        double count = 0.0;
        for (int64_t j = 0; j < keys; ++j) count += allowed.data()[row * keys + j];
        scale.data()[row] = 1.0f / std::sqrt(static_cast<float>(std::max(count, 1.0)));
    }
    return scale;
}

class Non : public AttentionNorm {
public:
    Var normalize(const Var& scores, const ops::AttentionMask& mask) const override { return reference(scores, mask); }
    Var reference(const Var& scores, const ops::AttentionMask& mask) const override {
        const Tensor allowed = ops::allowed_entries(mask, scores.shape());  // (B, 1, Lq, Lk)
        return ops::mul(ops::mul(scores, Var(allowed)), Var(inverse_sqrt_key_counts(allowed)));
    }
};

}  // namespace

std::unique_ptr<AttentionNorm> make_non(const AttentionNormOptions&) { return std::make_unique<Non>(); }

}  // namespace hnas::nn
