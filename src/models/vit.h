// A ViT-style encoder (Dosovitskiy et al. 2021) as paper 003 §9 Table 1 runs it: an image cut into
// P patches, each flattened and embedded by one linear map, a learnable class token in front, learned
// position embeddings, dropout, an encoder stack of any kinds (OT-ViT: `ot` in the last layer), and the
// class token's final state through a linear classifier.
// Shapes: B batch, P patches, V values per patch, D width, C classes.
#pragma once

#include "models/model.h"

namespace hnas::models {

class VitModel : public StackModel {
public:
    VitModel(const ModelConfig& config, Rng& init_rng, Rng& dropout_rng);

    std::vector<LayerStack> stacks() const override { return {{"encoder", encoder_.layers}}; }

    // patches (B, P, V) -> states (B, P + 1, D), the class token's first; `partners`: extra templates for
    // the layers whose kind compares them (paper 003 §9's same-class images).
    Var encode(const Tensor& patches, const nn::TemplatePartners* partners = nullptr) const;
    // states (B, P + 1, D) -> (B, C) from the class token's state
    Var logits(const Var& states) const;

private:
    nn::Linear& patch_embedding_;
    Var class_token_;  // (1, 1, D)
    Var positions_;    // (1, P + 1, D)
    nn::Dropout& embedding_dropout_;
    EncoderStack encoder_;
    nn::Linear& classifier_;
};

}  // namespace hnas::models
