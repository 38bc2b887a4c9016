// One Transformer encoder layer, post-LN as in Vaswani et al. (2017) and the papers hnas follows:
// x = LN(x + dropout(attention(x))); x = LN(x + dropout(FFN(x))).
#pragma once

#include "nn/attention.h"

namespace hnas::nn {

struct EncoderLayerOptions {
    AttentionOptions attention;  // width, heads, kind, prior, attention dropout
    int64_t hidden = 0;          // feed-forward width
    Activation activation = Activation::gelu;
    float dropout = 0.0f;        // on the residual branches and inside the feed-forward
};

class EncoderLayer : public Module {
public:
    EncoderLayer(const EncoderLayerOptions& options, Rng& init_rng, Rng& dropout_rng);
    Var forward(const Var& x, const ops::AttentionMask& mask) const;  // (B, T, D) -> (B, T, D)
    MultiHeadAttention& self_attention() { return self_attn_; }

private:
    MultiHeadAttention& self_attn_;
    LayerNorm& self_attn_norm_;
    FeedForward& ffn_;
    LayerNorm& ffn_norm_;
    Dropout& dropout_;
};

}  // namespace hnas::nn
