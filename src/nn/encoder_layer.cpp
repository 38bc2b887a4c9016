#include "nn/encoder_layer.h"

namespace hnas::nn {

EncoderLayer::EncoderLayer(const EncoderLayerOptions& o, Rng& init_rng, Rng& dropout_rng)
    : self_attn_(register_module("self_attn", std::make_unique<MultiHeadAttention>(o.attention, init_rng, dropout_rng))),
      self_attn_norm_(register_module("self_attn_norm", std::make_unique<LayerNorm>(o.attention.width))),
      ffn_(register_module("ffn", std::make_unique<FeedForward>(o.attention.width, o.hidden, o.activation, o.dropout,
                                                                 init_rng, dropout_rng))),
      ffn_norm_(register_module("ffn_norm", std::make_unique<LayerNorm>(o.attention.width))),
      dropout_(register_module("dropout", std::make_unique<Dropout>(o.dropout, dropout_rng))) {}

Var EncoderLayer::forward(const Var& x, const ops::AttentionMask& mask) const {
    Var attended = self_attn_norm_.forward(ops::add(x, dropout_.forward(self_attn_.forward(x, x, mask))));
    return ffn_norm_.forward(ops::add(attended, dropout_.forward(ffn_.forward(attended))));
}

}  // namespace hnas::nn
