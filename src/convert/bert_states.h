// Every layer's hidden states of an hnas BERT-style encoder, as Hugging Face's BertModel returns them with
// output_hidden_states=True: the embeddings' output (token + position + segment, layer norm), then the
// output of each encoder layer; the last equals BertModel::encode. For comparing an imported or exported
// BERT with transformers layer by layer (`hnas hidden-states`, scripts/bert_parity.py and its
// --export, tests/convert/test_bert_import.cpp).
#pragma once

#include <string>
#include <vector>

#include "backend/matmul.h"
#include "models/bert.h"
#include "tasks/trained_model.h"

namespace hnas::convert {

// input_ids, segment_ids (B, L) int32, valid (B, L) f32 -> layers + 1 tensors (B, L, D), evaluation mode
// as the model is set; padding positions hold whatever the layers compute there.
std::vector<Tensor> bert_hidden_states(const models::BertModel& model, const Tensor& input_ids, const Tensor& segment_ids,
                                       const Tensor& valid);

struct HiddenStatesOptions {
    int64_t batch = 8;            // lines per padded batch (each padded to its longest line)
    backend::MatmulPrecision precision = backend::MatmulPrecision::f32;
};

// `lines` of text through a BERT-style checkpoint: each line as [CLS] pieces [SEP] (cut to the model's
// positions), batches of options.batch lines padded to their longest. Writes a safetensors file of f32
// tensors: "lengths" (N) tokens per line, "input_ids" (T) the vocab.txt rows of the real tokens of all
// lines in order (T = Σ lengths), "hidden.K" (T, D) for K = 0 (embeddings) … layers, the states of real
// tokens only, and "mean_pooled" (N, D) the mean of the last layer's states over each line's tokens
// (sentence-transformers' pooling, not normalized). Metadata: checkpoint, batch, precision, layers.
void write_hidden_states(const std::string& checkpoint, const std::vector<std::string>& lines, const HiddenStatesOptions& options,
                         const std::string& out);

}  // namespace hnas::convert
