// What every model offers the code above it (the tasks, the trainer, the analyses): its config and
// every attention by name, so nothing above src/models/ needs to know which model it holds to analyse
// it; a StackModel lists its layer stacks, and a TokenModel also runs its encoder on token ids on its own.
#pragma once

#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "models/model_config.h"
#include "nn/transformer_layer.h"

namespace hnas::models {

// One named stack of layers ("encoder", "decoder").
struct LayerStack {
    std::string name;
    std::vector<nn::TransformerLayer*> layers;
};

// An attention sublayer by its parameter path ("encoder.layers.0.self_attn", "decoder.layers.1.cross_attn").
struct NamedAttention {
    std::string name;
    nn::MultiHeadAttention* attention;
};

// The options of one attention of `stack` (kind `stack.kinds[index]`) from the model config; without
// the stack's shared prior, which the stack computes once for all its layers.
nn::AttentionOptions attention_options(const ModelConfig& config, const AttentionStackConfig& stack,
                                       nn::AttentionRole role, size_t index);

// The layer options of stack layer `index` from the model config.
nn::TransformerLayerOptions layer_options(const ModelConfig& config, const AttentionStackConfig& self,
                                          nn::AttentionRole role, size_t index, const AttentionStackConfig* cross);

// An encoder of bidirectional layers ("encoder.layers.<i>") and, pre-LN, its final norm
// ("encoder.final_norm"): the stack of BertModel and SymbolEncoder.
struct EncoderStack {
    std::vector<nn::TransformerLayer*> layers;
    nn::LayerNorm* final_norm = nullptr;
    nn::RelativePositionBias* prior = nullptr;  // "encoder.relative_bias", with a prior the layers share
    // x (B, L, D) -> (B, L, D); `partners`: extra templates for the layers whose kind compares them
    Var forward(Var x, const ops::AttentionMask& mask, const nn::TemplatePartners* partners = nullptr) const;
};

// A forward pass over batch `index` of fixed inputs, run for what the attentions record while recording
// is on (nn::MultiHeadAttention::record_statistics); returns the rows it ran, 0 past the last batch.
using DiagnosticForward = std::function<int64_t(size_t index)>;

class TokenModel;

class Model : public nn::Module {
public:
    explicit Model(const ModelConfig& config) : config_(config) {}

    const ModelConfig& config() const { return config_; }
    // Every attention by parameter path, in the order the model runs them.
    virtual std::vector<NamedAttention> attentions() const = 0;
    // This model as one whose encoder reads token ids on its own; null when it reads none (multi-view, ViT).
    virtual const TokenModel* token_model() const { return nullptr; }

protected:
    // Every matrix redrawn as config.weight_init says (called last by each model's constructor).
    void apply_weight_init(Rng& init_rng);

    ModelConfig config_;
};

// A model whose attentions live in layer stacks (every model but the multi-view one).
class StackModel : public Model {
public:
    using Model::Model;

    // The layer stacks, encoder first.
    virtual std::vector<LayerStack> stacks() const = 0;
    // Stack by stack in layer order: self-attention, then cross-attention.
    std::vector<NamedAttention> attentions() const override;

protected:
    // Registers config.encoder_layers layers (and a pre-LN final norm, and a shared prior) on this model.
    EncoderStack register_encoder_stack(Rng& init_rng, Rng& dropout_rng);
    // The prior `stack` shares over its layers, registered as `name`; null unless it has one.
    nn::RelativePositionBias* register_stack_prior(const std::string& name, const AttentionStackConfig& stack);
};

// A model that reads token ids (Seq2SeqModel, BertModel, SymbolEncoder): its encoder runs on its own.
class TokenModel : public StackModel {
public:
    using StackModel::StackModel;

    // ids (B, L), valid (B, L) -> the encoder's states (B, L, D); a BERT-style model sees one segment.
    virtual Var encode_tokens(const Tensor& ids, const Tensor& valid) const = 0;
    const TokenModel* token_model() const override { return this; }
};

}  // namespace hnas::models
