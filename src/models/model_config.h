// The settings of the two model families, as plain values. src/config/ fills them from JSON (and
// documents every option in configs/README.md); models receive them and never read JSON.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "base/enum_names.h"
#include "nn/attention.h"
#include "nn/layers.h"
#include "nn/transformer_layer.h"

namespace hnas::models {

// The attention of one stack (encoder self, decoder self or cross): a kind per layer plus every kind's
// settings, and the optional relative-position prior.
struct AttentionStackConfig {
    std::vector<std::string> kinds{nn::default_attention_kind()};  // one name for every layer, or one per layer
    nn::KindSettingsByName kind_settings;  // by kind (nn::read_kind_settings); a kind missing here has its defaults
    nn::ScoreScale score_scale = nn::ScoreScale::inv_sqrt_head_width;
    float alpha = 1.0f;  // paper 003 Eq. 18's α on the scores (nn::AttentionOptions::alpha)
    std::optional<nn::RelativePositionOptions> prior;
    std::optional<nn::ContextPreferenceOptions> context_prior;  // paper 003 §7 (nn/context_preference.h)
    // One prior table for all layers of the stack, its bias computed once per forward (T5); false: one
    // table per layer.
    bool share_prior = false;
};

// Padding's token id, fixed by the tokenizer (src/data/tokenizer.h); losses ignore it.
constexpr int32_t kPadId = 0;

// seq2seq: Seq2SeqModel; bert: BertModel; symbols: SymbolEncoder (paper 002's synthetic tasks);
// multiview: MultiviewModel (paper 004's multi-view attention); vit: VitModel (paper 003 §9's images).
enum class Architecture { seq2seq, bert, symbols, multiview, vit };
inline constexpr EnumName<Architecture> kArchitectureNames[]{{Architecture::seq2seq, "seq2seq"},
                                                             {Architecture::bert, "bert"},
                                                             {Architecture::symbols, "symbols"},
                                                             {Architecture::multiview, "multiview"},
                                                             {Architecture::vit, "vit"}};
constexpr const auto& enum_names(Architecture) { return kArchitectureNames; }

// The heads on a BERT-style encoder. The task decides which (src/tasks/); their parameters keep the
// same names in every task, so a fine-tuning run loads a pretrained encoder by name.
struct BertHeads {
    bool masked_lm = true;        // dense + GELU + layer norm + the token embedding as output
    bool sentence_order = false;  // ALBERT's sentence-order prediction: 2 logits from the pooled [CLS]
    int64_t classes = 0;          // classification from the pooled [CLS]; 1: one regression output
    bool span = false;            // span extraction: start and end logits at every position
};
enum class PositionEncoding { learned, sinusoidal, none };
inline constexpr EnumName<PositionEncoding> kPositionEncodingNames[]{
    {PositionEncoding::learned, "learned"}, {PositionEncoding::sinusoidal, "sinusoidal"}, {PositionEncoding::none, "none"}};
constexpr const auto& enum_names(PositionEncoding) { return kPositionEncodingNames; }

// The output of a SymbolEncoder, set by the synthetic task from its problem: one logit per position,
// or `classes` logits from the first position, which are positions (cut to the sequence) or symbols.
struct SymbolOutput {
    bool per_position = true;
    int64_t classes = 0;
    bool positions = false;
};

// What a ViT reads and answers, from the images task's data options: P patches of V values each, C classes.
struct ImageInput {
    int64_t patches = 0, patch_values = 0, classes = 0;
};

// How a model's matrices start: each layer's own initializer (Xavier for projections, normal for
// embeddings), or every matrix from N(0, 0.02²) truncated at 2σ (BERT's initializer, and paper 002's code
// for all its weights).
enum class WeightInit { per_layer, truncated_normal };
inline constexpr EnumName<WeightInit> kWeightInitNames[]{{WeightInit::per_layer, "per_layer"},
                                                         {WeightInit::truncated_normal, "truncated_normal"}};
constexpr const auto& enum_names(WeightInit) { return kWeightInitNames; }

// The feed-forward width per unit of model width (Vaswani et al. 2017), unless a config sets it.
constexpr int64_t kFfnPerWidth = 4;

// The defaults are the encoder-decoder's (Vaswani et al.'s Transformer-base; the papers' models have
// 12 layers of d 768); bert_base() gives BERT's.
struct ModelConfig {
    Architecture architecture = Architecture::seq2seq;
    int64_t vocab_size = 0;
    int64_t width = 512, heads = 8, ffn_width = kFfnPerWidth * width;
    int64_t encoder_layers = 6, decoder_layers = 6;  // bert: encoder_layers only
    // seq2seq: decoder layer i runs on encoder layer i's weights, its attention projections serving
    // self- and cross-attention (the reading of paper 004 App. D's "about 108M", docs/papers.md).
    bool share_encoder_decoder = false;
    nn::Activation activation = nn::Activation::gelu;
    nn::NormPlacement norm = nn::NormPlacement::post;
    nn::Mixer mixer = nn::Mixer::attention;  // of the encoder's layers (the decoder's always attend)
    bool mte_attention_norm = true;          // norm mte: the layer norm on the attention's merged heads
    PositionEncoding positions = PositionEncoding::learned;
    int64_t max_source_positions = 128, max_target_positions = 64;  // bert: max_source_positions
    int64_t segments = 2;                                          // bert only
    float embedding_dropout = 0.1f, attention_dropout = 0.1f, residual_dropout = 0.1f, ffn_dropout = 0.0f;
    bool tie_embeddings = true;   // seq2seq: output projection = token embedding
    bool scale_embeddings = true; // seq2seq: token embeddings times sqrt(width)
    bool embedding_norm = false;  // layer norm after the embedding sum (always on for bert)
    float layer_norm_eps = 1e-5f; // of every layer norm (BERT's public checkpoints: 1e-12)
    WeightInit weight_init = WeightInit::per_layer;
    BertHeads bert_heads;         // bert only
    SymbolOutput symbol_output;   // symbols only
    int64_t multiview_classes = 0; // multiview only: the classes of its label
    ImageInput image;              // vit only
    AttentionStackConfig encoder_attention, decoder_attention, cross_attention;
};

// BERT-base (Devlin et al. 2019): d 768, 12 heads, FFN 3072, 12 layers, 512 positions, two segments, a
// layer norm after the embedding sum and unscaled embeddings.
inline ModelConfig bert_base() {
    ModelConfig m;
    m.architecture = Architecture::bert;
    m.width = 768;
    m.heads = 12;
    m.ffn_width = kFfnPerWidth * m.width;
    m.encoder_layers = 12;
    m.max_source_positions = 512;
    m.scale_embeddings = false;
    m.embedding_norm = true;
    return m;
}

}  // namespace hnas::models
