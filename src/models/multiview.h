// Paper 004's multi-view attention model (§6.1, App. B; paper 000 §7.1), after Yu et al. (2019): one
// attention layer of one head fuses the boxes of three views. Queries are a transformation of the
// primary view's features, keys a transformation of a secondary view's, and the values are that
// view's untransformed features (App. B found them better); each primary box's output is its own
// feature plus what it gathered from each secondary view, layer-normalized:
//   y_i = LN(x⁰_i + Σ_{m=1,2} Σ_j π^m_ij x^m_j),  π^m = the attention kind's weights of q_i = W^m_q x⁰_i, k_j = W^m_k x^m_j.
// With mixer `sum` or `max` the attention is replaced by the sum or maximum of a secondary view's boxes
// (the no-attention baseline: every primary box sees the same pooled view). The fused boxes then answer
// as a DeepSets readout stands in for the VQA model above them: a GELU layer per box, their sum, a GELU
// layer and the class logits.
// Shapes: B batch, L_v boxes of view v, D feature width, H readout width, C classes.
#pragma once

#include <array>

#include "models/model.h"

namespace hnas::models {

// Paper 004 App. B: one primary view and two secondary views.
inline constexpr size_t kViews = 3;

// One view's boxes: features (B, L_v, D) and valid (B, L_v) of 1 / 0.
struct ViewInput {
    Tensor features, valid;
};
using MultiviewInput = std::array<ViewInput, kViews>;

class MultiviewModel : public Model {
public:
    MultiviewModel(const ModelConfig& config, Rng& init_rng, Rng& dropout_rng);

    // "fusion.views.1", "fusion.views.2" (none with a pooling mixer).
    std::vector<NamedAttention> attentions() const override;

    Var fuse(const MultiviewInput& views) const;     // -> (B, L_0, D), 0 at padded primary boxes
    Var logits(const MultiviewInput& views) const;   // -> (B, C)

private:
    std::array<nn::MultiHeadAttention*, kViews - 1> attentions_{};
    nn::LayerNorm& fusion_norm_;
    nn::Linear& per_box_;
    nn::Linear& pooled_;
    nn::Linear& output_;
};

}  // namespace hnas::models
