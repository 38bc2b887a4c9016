// The BERT-style encoder (Devlin et al. 2019): token + position + segment embeddings with layer norm,
// an encoder stack, the pooled [CLS] state (dense + tanh), and the heads the task asks for
// (ModelConfig::bert_heads):
//   masked LM        dense + GELU + layer norm + the token embedding as output projection with its own
//                    bias, evaluated only at the masked positions;
//   sentence order   ALBERT's sentence-order prediction (Lan et al. 2020): 2 logits from the pooled state;
//   classification   dropout + linear from the pooled state (BertForSequenceClassification): N logits,
//                    or 1 regression output;
//   span             linear from every state to (start, end) logits (BertForQuestionAnswering).
// Shapes: B batch, L length, D width, V vocabulary, N masked positions, C classes.
#pragma once

#include "models/embeddings.h"
#include "models/model.h"

namespace hnas::models {

// Start and end logits of a span head, each (B, L).
struct SpanLogits {
    Var start, end;
};

class BertModel : public TokenModel {
public:
    BertModel(const ModelConfig& config, Rng& init_rng, Rng& dropout_rng);

    // input_ids, segment_ids (B, L), valid (B, L) -> states (B, L, D); `partners`: extra templates for the
    // layers whose kind compares templates (paper 003 §9's same-class template sets)
    Var encode(const Tensor& input_ids, const Tensor& segment_ids, const Tensor& valid,
               const nn::TemplatePartners* partners = nullptr) const;
    Var encode_tokens(const Tensor& ids, const Tensor& valid) const override;
    // What encode computes, every step kept, as Hugging Face's output_hidden_states orders them: the
    // embeddings' output, then each layer's (the last is encode's, but for a pre-LN stack's final norm).
    std::vector<Var> hidden_states(const Tensor& input_ids, const Tensor& segment_ids, const Tensor& valid) const;
    std::vector<LayerStack> stacks() const override { return {{"encoder", encoder_.layers}}; }

    // states (B, L, D), flat positions b·L + t (N) -> logits (N, V)
    Var mlm_logits(const Var& states, const Tensor& masked_positions) const;
    // states (B, L, D) -> (B, D): tanh(dense(state of [CLS]))
    Var pooled(const Var& states) const;
    // pooled (B, D) -> (B, 2)
    Var sentence_order_logits(const Var& pooled) const;
    // pooled (B, D) -> (B, C)
    Var class_logits(const Var& pooled) const;
    // states (B, L, D), valid (B, L) -> start and end logits (B, L), padding at kMaskedScore
    SpanLogits span_logits(const Var& states, const Tensor& valid) const;

    // Mean cross-entropy of the masked tokens.
    Var mlm_loss(const Tensor& input_ids, const Tensor& segment_ids, const Tensor& valid,
                 const Tensor& masked_positions, const Tensor& masked_labels) const;

private:
    nn::Linear& head(nn::Linear* linear, const char* name) const;

    nn::Embedding& tokens_;
    EmbeddingSum& embeddings_;
    EncoderStack encoder_;
    nn::Linear* mlm_dense_ = nullptr;
    nn::LayerNorm* mlm_norm_ = nullptr;
    Var mlm_bias_;  // (V)
    nn::Linear& pooler_;
    nn::Linear* sentence_order_ = nullptr;
    nn::Dropout* classifier_dropout_ = nullptr;
    nn::Linear* classifier_ = nullptr;
    nn::Linear* span_ = nullptr;
};

// The heads' losses (BertForSequenceClassification, BertForQuestionAnswering); the classification and
// sentence-order losses are the cross-entropy of their logits (ops::cross_entropy).
// Mean squared error of one regression output per row: outputs (B, 1), targets (B) f32.
Var regression_loss(const Var& outputs, const Tensor& targets);
// The mean of the start and the end positions' cross-entropies; positions (B) int32.
Var span_loss(const SpanLogits& logits, const Tensor& start_positions, const Tensor& end_positions);

}  // namespace hnas::models
