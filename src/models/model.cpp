#include "models/model.h"

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

}  // namespace hnas::models
