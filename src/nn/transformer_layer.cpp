#include "nn/transformer_layer.h"

namespace hnas::nn {

TransformerLayer::TransformerLayer(const TransformerLayerOptions& o, Rng& init_rng, Rng& dropout_rng)
    : pre_norm_(o.norm == NormPlacement::pre),
      self_attn_(register_module("self_attn", std::make_unique<MultiHeadAttention>(o.self_attention, init_rng, dropout_rng))),
      self_attn_norm_(register_module("self_attn_norm", std::make_unique<LayerNorm>(o.self_attention.width, o.layer_norm_eps))),
      ffn_(register_module("ffn", std::make_unique<FeedForward>(o.self_attention.width, o.hidden, o.activation,
                                                                 o.ffn_dropout, init_rng, dropout_rng))),
      ffn_norm_(register_module("ffn_norm", std::make_unique<LayerNorm>(o.self_attention.width, o.layer_norm_eps))),
      dropout_(register_module("dropout", std::make_unique<Dropout>(o.residual_dropout, dropout_rng))) {
    if (o.cross_attention) {
        cross_attn_ = &register_module("cross_attn", std::make_unique<MultiHeadAttention>(*o.cross_attention, init_rng, dropout_rng));
        cross_attn_norm_ = &register_module("cross_attn_norm", std::make_unique<LayerNorm>(o.self_attention.width, o.layer_norm_eps));
    }
}

template <typename Branch>
Var TransformerLayer::sublayer(const Var& x, const LayerNorm& norm, Branch branch) const {
    if (pre_norm_) return ops::add(x, dropout_.forward(branch(norm.forward(x))));
    return norm.forward(ops::add(x, dropout_.forward(branch(x))));
}

Var TransformerLayer::forward(const Var& x, const ops::AttentionMask& self_mask, const Var& memory,
                              const ops::AttentionMask& memory_mask, LayerCache* cache) const {
    HNAS_CHECK(memory.defined() == (cross_attn_ != nullptr), "transformer layer: ",
               cross_attn_ ? "a decoder layer needs the encoder's memory" : "an encoder layer takes no memory");
    AttentionCache* self_cache = cache ? &cache->self : nullptr;
    AttentionCache* cross_cache = cache ? &cache->cross : nullptr;
    Var h = sublayer(x, self_attn_norm_, [&](const Var& in) { return self_attn_.forward(in, in, self_mask, self_cache); });
    if (cross_attn_) {
        h = sublayer(h, *cross_attn_norm_,
                     [&](const Var& in) { return cross_attn_->forward(in, memory, memory_mask, cross_cache); });
    }
    return sublayer(h, ffn_norm_, [&](const Var& in) { return ffn_.forward(in); });
}

}  // namespace hnas::nn
