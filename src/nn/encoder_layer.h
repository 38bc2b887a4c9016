// One Transformer encoder layer, post-LN as in Vaswani et al. (2017) and the papers hnas follows:
// x = LN(x + dropout(attention(x))); x = LN(x + dropout(FFN(x))).
#pragma once

#include "nn/attention.h"

namespace hnas::nn {

struct EncoderLayerOptions {
    int64_t width = 0, heads = 0, hidden = 0;
    Activation activation = Activation::gelu;
    float dropout = 0.0f, attention_dropout = 0.0f;
};

class EncoderLayer : public Module {
public:
    EncoderLayer(const EncoderLayerOptions& options, Rng& init_rng, Rng& dropout_rng);
    Var forward(const Var& x, const Tensor& mask) const;  // (B, T, D) -> (B, T, D)

private:
    MultiHeadAttention& self_attn_;
    LayerNorm& self_attn_norm_;
    FeedForward& ffn_;
    LayerNorm& ffn_norm_;
    Dropout& dropout_;
};

}  // namespace hnas::nn
