#include "models/model.h"

#include <algorithm>

namespace hnas::models {

std::vector<NamedAttention> Model::attentions() const {
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
        if (named.parameter.rank() != 2) continue;  // layer norms, biases and per-head scalars keep their start
        const Tensor drawn = nn::init_truncated_normal(named.parameter.shape(), 0.02f, init_rng);
        std::copy_n(drawn.data(), drawn.numel(), named.parameter.value().data());
    }
}

}  // namespace hnas::models
