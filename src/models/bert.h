// The BERT-style encoder for masked-LM pretraining (Devlin et al. 2019): token + position + segment
// embeddings with layer norm, an encoder stack, an MLM head (dense + GELU + layer norm + the token
// embedding as output projection, with its own bias) evaluated only at the masked positions, and the
// pooled [CLS] state (dense + tanh) for sentence-level heads.
// Shapes: B batch, L length, D width, V vocabulary, N masked positions.
#pragma once

#include "models/embeddings.h"
#include "nn/transformer_layer.h"

namespace hnas::models {

class BertModel : public nn::Module {
public:
    BertModel(const ModelConfig& config, Rng& init_rng, Rng& dropout_rng);

    // input_ids, segment_ids (B, L), valid (B, L) -> states (B, L, D)
    Var encode(const Tensor& input_ids, const Tensor& segment_ids, const Tensor& valid) const;
    // states (B, L, D), flat positions b·L + t (N) -> logits (N, V)
    Var mlm_logits(const Var& states, const Tensor& masked_positions) const;
    // states (B, L, D) -> (B, D): tanh(dense(state of [CLS]))
    Var pooled(const Var& states) const;
    // Mean cross-entropy of the masked tokens.
    Var mlm_loss(const Tensor& input_ids, const Tensor& segment_ids, const Tensor& valid,
                 const Tensor& masked_positions, const Tensor& masked_labels) const;

    const ModelConfig& config() const { return config_; }
    std::vector<nn::TransformerLayer*> encoder_layers() const { return layers_; }

private:
    ModelConfig config_;
    nn::Embedding& tokens_;
    EmbeddingSum& embeddings_;
    std::vector<nn::TransformerLayer*> layers_;
    nn::LayerNorm* final_norm_ = nullptr;  // pre-LN only
    nn::Linear& mlm_dense_;
    nn::LayerNorm& mlm_norm_;
    Var mlm_bias_;  // (V)
    nn::Linear& pooler_;
};

}  // namespace hnas::models
