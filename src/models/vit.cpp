#include "models/vit.h"

namespace hnas::models {

VitModel::VitModel(const ModelConfig& config, Rng& init_rng, Rng& dropout_rng)
    : StackModel(config),
      patch_embedding_(register_module("patch_embedding", std::make_unique<nn::Linear>(config.image.patch_values, config.width, init_rng))),
      class_token_(register_parameter("class_token", nn::init_truncated_normal({1, 1, config.width}, 0.02f, init_rng))),
      positions_(register_parameter("positions", nn::init_truncated_normal({1, config.image.patches + 1, config.width}, 0.02f, init_rng))),
      embedding_dropout_(register_module("embedding_dropout", std::make_unique<nn::Dropout>(config.embedding_dropout, dropout_rng))),
      encoder_(register_encoder_stack(init_rng, dropout_rng)),
      classifier_(register_module("classifier", std::make_unique<nn::Linear>(config.width, config.image.classes, init_rng))) {
    HNAS_CHECK(config.image.patches > 0 && config.image.patch_values > 0 && config.image.classes > 1, "vit model: ",
               config.image.patches, " patches of ", config.image.patch_values, " values and ", config.image.classes,
               " classes: the images task sets them from its data");
    HNAS_CHECK(config.mixer == nn::Mixer::attention, "vit model: the class token gathers the patches by attention, not ",
               name_of(config.mixer), " pooling");
    apply_weight_init(init_rng);
}

Var VitModel::encode(const Tensor& patches, const nn::TemplatePartners* partners) const {
    const ImageInput& image = config_.image;
    HNAS_CHECK(patches.rank() == 3 && patches.dim(1) == image.patches && patches.dim(2) == image.patch_values,
               "vit model: patches ", shape_str(patches.shape()), " must be (B, ", image.patches, ", ", image.patch_values, ")");
    const int64_t batch = patches.dim(0);
    const Var tokens = patch_embedding_.forward(Var(patches));                                    // (B, P, D)
    const Var cls = ops::add(Var(Tensor::zeros({batch, 1, config_.width})), class_token_);      // (B, 1, D)
    const Var x = embedding_dropout_.forward(ops::add(ops::concat({cls, tokens}, 1), positions_));  // (B, P + 1, D)
    return encoder_.forward(x, ops::AttentionMask{}, partners);
}

Var VitModel::logits(const Var& states) const {
    const Var cls = ops::reshape(ops::slice(states, 1, 0, 1), {states.dim(0), config_.width});
    return classifier_.forward(cls);
}

}  // namespace hnas::models
