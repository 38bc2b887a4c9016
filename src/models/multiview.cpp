#include "models/multiview.h"

#include <string>

namespace hnas::models {

namespace {
// Each view's attention as any encoder attention of the config (kind, α, priors), with App. B's
// untransformed values.
nn::AttentionOptions fusion_options(const ModelConfig& config) {
    const AttentionStackConfig& stack = config.encoder_attention;
    HNAS_CHECK(!(stack.prior && stack.share_prior), "multiview model: a shared prior (prior.shared) belongs to a stack of "
               "layers; the fusion has one attention per view, so give each its own (prior.shared false)");
    // Bidirectional: every primary box sees every secondary box.
    nn::AttentionOptions options = attention_options(config, stack, nn::AttentionRole::bidirectional, 0);
    options.project_values = false;
    return options;
}
}  // namespace

MultiviewModel::MultiviewModel(const ModelConfig& config, Rng& init_rng, Rng& dropout_rng)
    : Model(config),
      attentions_([&] {
          std::array<nn::MultiHeadAttention*, kViews - 1> attentions{};
          if (config.mixer != nn::Mixer::attention) return attentions;
          for (size_t m = 0; m < attentions.size(); ++m) {
              attentions[m] = &register_module("fusion.views." + std::to_string(m + 1),
                                               std::make_unique<nn::MultiHeadAttention>(fusion_options(config), init_rng, dropout_rng));
          }
          return attentions;
      }()),
      fusion_norm_(register_module("fusion.norm", std::make_unique<nn::LayerNorm>(config.width, config.layer_norm_eps))),
      per_box_(register_module("readout.per_box", std::make_unique<nn::Linear>(config.width, config.ffn_width, init_rng))),
      pooled_(register_module("readout.pooled", std::make_unique<nn::Linear>(config.ffn_width, config.ffn_width, init_rng))),
      output_(register_module("readout.output", std::make_unique<nn::Linear>(config.ffn_width, config.multiview_classes, init_rng))) {
    HNAS_CHECK(config.architecture == Architecture::multiview, "multiview model: the config describes another architecture");
    HNAS_CHECK(config.multiview_classes > 0, "multiview model: the output has no classes");
    apply_weight_init(init_rng);
}

std::vector<NamedAttention> MultiviewModel::attentions() const {
    std::vector<NamedAttention> out;
    for (size_t m = 0; m < attentions_.size(); ++m) {
        if (attentions_[m]) out.push_back({"fusion.views." + std::to_string(m + 1), attentions_[m]});
    }
    return out;
}

Var MultiviewModel::fuse(const MultiviewInput& views) const {
    const ViewInput& primary = views[0];
    HNAS_CHECK(primary.features.rank() == 3 && primary.features.dim(2) == config_.width, "multiview model: primary features ",
               shape_str(primary.features.shape()), " must be (B, L, ", config_.width, ")");
    Var sum(primary.features);  // (B, L_0, D)
    for (size_t m = 1; m < views.size(); ++m) {
        const ViewInput& view = views[m];
        HNAS_CHECK(view.features.rank() == 3 && view.features.dim(0) == primary.features.dim(0) &&
                       view.features.dim(2) == config_.width,
                   "multiview model: view ", m, "'s features ", shape_str(view.features.shape()), " do not match the primary's ",
                   shape_str(primary.features.shape()));
        const Var boxes(view.features);
        const Var gathered = attentions_[m - 1]
                                 ? attentions_[m - 1]->forward(Var(primary.features), boxes, {view.valid, primary.valid})
                                 : nn::pool_positions(boxes, view.valid, config_.mixer);  // (B, 1, D), broadcast
        sum = ops::add(sum, gathered);
    }
    const Var real(primary.valid.reshape({primary.valid.dim(0), primary.valid.dim(1), 1}));
    return ops::mul(fusion_norm_.forward(sum), real);  // App. B: element-wise sum, then layer norm
}

Var MultiviewModel::logits(const MultiviewInput& views) const {
    const Var fused = fuse(views);                                  // (B, L_0, D), 0 at padding
    const Var real(views[0].valid.reshape({views[0].valid.dim(0), views[0].valid.dim(1), 1}));
    const Var per_box = ops::mul(ops::gelu(per_box_.forward(fused)), real);  // (B, L_0, H)
    const Var pooled = ops::sum(per_box, 1);                        // (B, H)
    return output_.forward(ops::gelu(pooled_.forward(pooled)));    // (B, C)
}

}  // namespace hnas::models
