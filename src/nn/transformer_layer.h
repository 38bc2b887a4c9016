// One Transformer layer: a token mixer (self-attention, or paper 002's sum or max pooling), optional
// cross-attention over a memory (decoder layers), and a feed-forward block, each wrapped in dropout +
// residual + layer norm. Post-LN (Vaswani et al. 2017, the papers' setting) normalizes after each
// residual sum: x = LN(x + f(x)); pre-LN normalizes the branch input instead, x = x + f(LN(x)), and
// leaves the final norm to the stack; paper 002's MTE block (§4, App. D) normalizes the branch output,
// x = x + LN(f(x)), and inside the branches the attention's merged heads (then GELU) and the
// feed-forward's hidden layer.
#pragma once

#include <optional>

#include "nn/attention.h"

namespace hnas::nn {

// Where each block's layer norm sits: after the residual sum (post-LN) or on the branch input (pre-LN).
enum class NormPlacement { post, pre, mte };
inline constexpr EnumName<NormPlacement> kNormPlacementNames[]{
    {NormPlacement::post, "post"}, {NormPlacement::pre, "pre"}, {NormPlacement::mte, "mte"}};
constexpr const auto& enum_names(NormPlacement) { return kNormPlacementNames; }

// What mixes information across positions (paper 002, §4): attention, or the sum or the maximum over
// the real positions, broadcast back to every position (no parameters).
enum class Mixer { attention, sum, max };
inline constexpr EnumName<Mixer> kMixerNames[]{{Mixer::attention, "attention"}, {Mixer::sum, "sum"}, {Mixer::max, "max"}};
constexpr const auto& enum_names(Mixer) { return kMixerNames; }
// The sum or the maximum of x (B, T, D) over its real positions (valid (B, T), undefined: all real): (B, 1, D).
Var pool_positions(const Var& x, const Tensor& valid, Mixer mixer);

struct TransformerLayerOptions {
    AttentionOptions self_attention;                  // width, heads, kind, role, prior, attention dropout
    std::optional<AttentionOptions> cross_attention;  // decoder layers only
    int64_t hidden = 0;                               // feed-forward width
    Activation activation = Activation::gelu;
    float residual_dropout = 0.0f;                    // on every branch output before the residual sum
    float ffn_dropout = 0.0f;                         // inside the feed-forward, after the activation
    NormPlacement norm = NormPlacement::post;
    float layer_norm_eps = 1e-5f;
    Mixer mixer = Mixer::attention;  // of the self-attention sub-block (the other sub-blocks stay)
    // MTE only: the layer norm on the attention's merged heads; paper 002's NON replaces it by the
    // 1/√n its weights carry (kind `non`).
    bool mte_attention_norm = true;
};

// The biases (1, H, Lq, Lk) of the priors a stack shares over its layers (T5's relative-position bias,
// computed once per forward); undefined where the stack has none, or where each attention has its own.
struct StackPriors {
    Var self, cross;
};

// A decoder layer's state between decoding steps.
struct LayerCache {
    AttentionCache self, cross;
    // AttentionCache::keep_rows for both attentions.
    void keep_rows(const std::vector<int64_t>& rows, const std::vector<int64_t>* memory_rows) {
        self.keep_rows(rows, memory_rows);
        cross.keep_rows(rows, memory_rows);
    }
};

class TransformerLayer : public Module {
public:
    // With `weights_from` (model.share_encoder_decoder), this layer runs on that layer's weights: its
    // self- and cross-attention on that layer's self-attention projections, its feed-forward and norms
    // the same modules. Only the cross-attention's norm and the attentions' normalizations are its own.
    TransformerLayer(const TransformerLayerOptions& options, Rng& init_rng, Rng& dropout_rng,
                     const TransformerLayer* weights_from = nullptr);

    // x (B, T, D) -> (B, T, D); memory (B, S, D) and its mask only for layers with cross-attention.
    // With a cache, one step of step-by-step decoding (x is (B, 1, D); see MultiHeadAttention).
    // `partners`: the self-attention's extra templates (paper 003 §9), for a kind that compares templates.
    Var forward(const Var& x, const ops::AttentionMask& self_mask, const Var& memory = Var(),
                const ops::AttentionMask& memory_mask = {}, LayerCache* cache = nullptr,
                const StackPriors& priors = {}, const TemplatePartners* partners = nullptr) const;

    // Null when the layer mixes by sum or max pooling.
    MultiHeadAttention* self_attention() { return self_attn_; }
    const MultiHeadAttention* self_attention() const { return self_attn_; }
    MultiHeadAttention* cross_attention() { return cross_attn_; }

private:
    // One sub-block: the residual sum of x and dropout(branch), normalized before or after.
    template <typename Branch>
    Var sublayer(const Var& x, const LayerNorm& norm, Branch branch) const;
    // The first sub-block's branch: self-attention or pooling over the positions, (B, T, D).
    Var mix(const Var& x, const ops::AttentionMask& mask, AttentionCache* cache, const Var& prior,
            const TemplatePartners* partners) const;

    NormPlacement norm_;
    Mixer mixer_;
    MultiHeadAttention* self_attn_;
    const LayerNorm& self_attn_norm_;
    const LayerNorm* attention_hidden_norm_ = nullptr;  // MTE
    MultiHeadAttention* cross_attn_ = nullptr;
    LayerNorm* cross_attn_norm_ = nullptr;
    const FeedForward& ffn_;
    const LayerNorm& ffn_norm_;
    Dropout& dropout_;
};

}  // namespace hnas::nn
