#include "nn/transformer_layer.h"

namespace hnas::nn {

namespace {
std::optional<float> ffn_hidden_norm(const TransformerLayerOptions& o) {
    return o.norm == NormPlacement::mte ? std::optional<float>(o.layer_norm_eps) : std::nullopt;
}

// (B, T, 1): 1 at the real positions of a (B, T, D) input, from their validity (B, T) (all real if undefined).
Tensor real_positions(const Var& x, const Tensor& valid) {
    if (!valid.defined()) return Tensor::full({x.dim(0), x.dim(1), 1}, 1.0f);
    return valid.reshape({x.dim(0), x.dim(1), 1});
}

// (B, T, 1): 0 at real positions and −1e9 at padding, so that a maximum never picks padding.
Tensor padding_penalty(const Tensor& real) {
    Tensor penalty = Tensor::empty(real.shape());
    for (int64_t t = 0; t < real.numel(); ++t) penalty.data()[t] = real.data()[t] > 0.5f ? 0.0f : -1e9f;
    return penalty;
}

// The self-attention projections that a layer running on `from`'s weights uses; null without.
const MultiHeadAttention* shared_projections(const TransformerLayer* from) {
    if (!from) return nullptr;
    const MultiHeadAttention* attention = from->self_attention();
    HNAS_CHECK(attention, "transformer layer: cannot run on the weights of a layer that pools instead of attending");
    return attention;
}
}  // namespace

Var pool_positions(const Var& x, const Tensor& valid, Mixer mixer) {
    HNAS_CHECK(mixer != Mixer::attention, "pool_positions: attention is not a pooling");
    const Var real(real_positions(x, valid));  // (B, T, 1)
    return mixer == Mixer::sum ? ops::sum(ops::mul(x, real), 1, true)
                               : ops::max(ops::add(x, Var(padding_penalty(real.value()))), 1, true);
}

TransformerLayer::TransformerLayer(const TransformerLayerOptions& o, Rng& init_rng, Rng& dropout_rng, const TransformerLayer* from)
    : norm_(o.norm),
      mixer_(o.mixer),
      self_attn_(o.mixer == Mixer::attention
                     ? &register_module("self_attn", std::make_unique<MultiHeadAttention>(o.self_attention, init_rng, dropout_rng,
                                                                                           shared_projections(from)))
                     : nullptr),
      self_attn_norm_(register_or_share("self_attn_norm", from ? &from->self_attn_norm_ : nullptr,
                                        [&] { return std::make_unique<LayerNorm>(o.self_attention.width, o.layer_norm_eps); })),
      ffn_(register_or_share("ffn", from ? &from->ffn_ : nullptr,
                             [&] {
                                 return std::make_unique<FeedForward>(o.self_attention.width, o.hidden, o.activation, o.ffn_dropout,
                                                                      init_rng, dropout_rng, ffn_hidden_norm(o));
                             })),
      ffn_norm_(register_or_share("ffn_norm", from ? &from->ffn_norm_ : nullptr,
                                  [&] { return std::make_unique<LayerNorm>(o.self_attention.width, o.layer_norm_eps); })),
      dropout_(register_module("dropout", std::make_unique<Dropout>(o.residual_dropout, dropout_rng))) {
    HNAS_CHECK(o.mixer == Mixer::attention || (!o.cross_attention && o.self_attention.role == AttentionRole::bidirectional),
               "transformer layer: ", name_of(o.mixer), " pooling sees every position, so it mixes only bidirectional ",
               "encoder layers, not ", name_of(o.self_attention.role));
    if (self_attn_ && o.norm == NormPlacement::mte && o.mte_attention_norm) {
        attention_hidden_norm_ =
            &register_or_share("self_attn_hidden_norm", from ? from->attention_hidden_norm_ : nullptr,
                               [&] { return std::make_unique<LayerNorm>(o.self_attention.width, o.layer_norm_eps); });
    }
    if (o.cross_attention) {
        cross_attn_ = &register_module("cross_attn", std::make_unique<MultiHeadAttention>(*o.cross_attention, init_rng, dropout_rng,
                                                                                         shared_projections(from)));
        cross_attn_norm_ = &register_module("cross_attn_norm", std::make_unique<LayerNorm>(o.self_attention.width, o.layer_norm_eps));
    }
}

template <typename Branch>
Var TransformerLayer::sublayer(const Var& x, const LayerNorm& norm, Branch branch) const {
    switch (norm_) {
    case NormPlacement::pre: return dropout_.add_to(x, branch(norm.forward(x)));
    case NormPlacement::mte: return dropout_.add_to(x, norm.forward(branch(x)));
    case NormPlacement::post: break;
    }
    return norm.forward_sum(x, branch(x), dropout_);
}

Var TransformerLayer::mix(const Var& x, const ops::AttentionMask& mask, AttentionCache* cache, const Var& prior,
                          const TemplatePartners* partners) const {
    if (mixer_ != Mixer::attention) {
        // paper 002 §4: sum- or max-reduce over the real positions, then broadcast to each of them
        return ops::mul(pool_positions(x, mask.key_valid, mixer_), Var(real_positions(x, mask.key_valid)));  // 0 at padding
    }
    if (norm_ != NormPlacement::mte) return self_attn_->forward(x, x, mask, cache, prior, partners);
    // paper 002 App. D: the merged heads layer-normalized (or, for NON, scaled in its weights), then GELU
    Var heads = self_attn_->attend(x, x, mask, cache, prior, partners);  // (B, T, D)
    if (attention_hidden_norm_) heads = attention_hidden_norm_->forward(heads);
    return self_attn_->project_output(ops::gelu(heads));
}

Var TransformerLayer::forward(const Var& x, const ops::AttentionMask& self_mask, const Var& memory,
                              const ops::AttentionMask& memory_mask, LayerCache* cache, const StackPriors& priors,
                              const TemplatePartners* partners) const {
    HNAS_CHECK(memory.defined() == (cross_attn_ != nullptr), "transformer layer: ",
               cross_attn_ ? "a decoder layer needs the encoder's memory" : "an encoder layer takes no memory");
    AttentionCache* self_cache = cache ? &cache->self : nullptr;
    AttentionCache* cross_cache = cache ? &cache->cross : nullptr;
    Var h = sublayer(x, self_attn_norm_, [&](const Var& in) { return mix(in, self_mask, self_cache, priors.self, partners); });
    if (cross_attn_) {
        h = sublayer(h, *cross_attn_norm_,
                     [&](const Var& in) { return cross_attn_->forward(in, memory, memory_mask, cross_cache, priors.cross); });
    }
    return sublayer(h, ffn_norm_, [&](const Var& in) { return ffn_.forward(in); });
}

}  // namespace hnas::nn
