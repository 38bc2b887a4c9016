#include "models/model.h"

#include <algorithm>

namespace hnas::models {

namespace {

bool all_zero(const Tensor& t) {
    return std::all_of(t.data(), t.data() + t.numel(), [](float x) { return x == 0.0f; });
}

}  // namespace

nn::AttentionOptions attention_options(const ModelConfig& config, const AttentionStackConfig& stack,
                                       nn::AttentionRole role, size_t index) {
    HNAS_CHECK(index < stack.kinds.size(), "model: no attention kind for layer ", index);
    nn::AttentionOptions options;
    options.width = config.width;
    options.heads = config.heads;
    options.dropout = config.attention_dropout;
    options.kind = stack.kinds[index];
    const auto settings = stack.kind_settings.find(options.kind);
    if (settings != stack.kind_settings.end()) options.kind_settings = settings->second;
    options.score_scale = stack.score_scale;
    options.role = role;
    options.alpha = stack.alpha;
    if (!stack.share_prior) options.prior = stack.prior;
    options.context_prior = stack.context_prior;
    return options;
}

nn::TransformerLayerOptions layer_options(const ModelConfig& config, const AttentionStackConfig& self,
                                          nn::AttentionRole role, size_t index, const AttentionStackConfig* cross) {
    nn::TransformerLayerOptions options;
    options.self_attention = attention_options(config, self, role, index);
    if (cross) options.cross_attention = attention_options(config, *cross, nn::AttentionRole::decoder_cross, index);
    options.hidden = config.ffn_width;
    options.activation = config.activation;
    options.residual_dropout = config.residual_dropout;
    options.ffn_dropout = config.ffn_dropout;
    options.norm = config.norm;
    options.layer_norm_eps = config.layer_norm_eps;
    options.mixer = cross || role != nn::AttentionRole::bidirectional ? nn::Mixer::attention : config.mixer;
    options.mte_attention_norm = config.mte_attention_norm;
    return options;
}

Var EncoderStack::forward(Var x, const ops::AttentionMask& mask, const nn::TemplatePartners* partners) const {
    nn::StackPriors priors;
    if (prior) priors.self = prior->forward(x.dim(1), x.dim(1));  // once for every layer, as T5
    for (const auto* layer : layers) x = layer->forward(x, mask, Var(), {}, nullptr, priors, partners);
    return final_norm ? final_norm->forward(x) : x;
}

EncoderStack StackModel::register_encoder_stack(Rng& init_rng, Rng& dropout_rng) {
    EncoderStack stack;
    for (size_t i = 0; i < static_cast<size_t>(config_.encoder_layers); ++i) {
        stack.layers.push_back(&register_module(
            "encoder.layers." + std::to_string(i),
            std::make_unique<nn::TransformerLayer>(
                layer_options(config_, config_.encoder_attention, nn::AttentionRole::bidirectional, i, nullptr), init_rng,
                dropout_rng)));
    }
    if (config_.norm == nn::NormPlacement::pre) {
        stack.final_norm = &register_module("encoder.final_norm", std::make_unique<nn::LayerNorm>(config_.width, config_.layer_norm_eps));
    }
    if (config_.mixer == nn::Mixer::attention) {
        stack.prior = register_stack_prior("encoder.relative_bias", config_.encoder_attention);
    }
    return stack;
}

nn::RelativePositionBias* StackModel::register_stack_prior(const std::string& name, const AttentionStackConfig& stack) {
    if (!stack.prior || !stack.share_prior) return nullptr;
    return &register_module(name, std::make_unique<nn::RelativePositionBias>(config_.heads, *stack.prior));
}

std::vector<NamedAttention> StackModel::attentions() const {
    std::vector<NamedAttention> out;
    for (const LayerStack& stack : stacks()) {
        for (size_t i = 0; i < stack.layers.size(); ++i) {
            const std::string prefix = stack.name + ".layers." + std::to_string(i);
            if (auto* self = stack.layers[i]->self_attention()) out.push_back({prefix + ".self_attn", self});
            if (auto* cross = stack.layers[i]->cross_attention()) out.push_back({prefix + ".cross_attn", cross});
        }
    }
    return out;
}

void Model::apply_weight_init(Rng& init_rng) {
    if (config_.weight_init == WeightInit::per_layer) return;
    for (auto& named : named_parameters()) {
        // layer norms, biases and per-head scalars keep their start, and so do matrices that start at zero:
        // the priors' tables and weights, so that u starts uniform
        if (named.parameter.rank() != 2 || all_zero(named.parameter.value())) continue;
        const Tensor drawn = nn::init_truncated_normal(named.parameter.shape(), 0.02f, init_rng);
        std::copy_n(drawn.data(), drawn.numel(), named.parameter.value().data());
    }
}

}  // namespace hnas::models
