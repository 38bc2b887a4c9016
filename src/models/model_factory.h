// Building a model from its config, and summarizing models by parameter count.
#pragma once

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "models/model_config.h"
#include "nn/attention.h"

namespace hnas::models {

// A Seq2SeqModel or a BertModel, as the config's architecture says.
std::unique_ptr<nn::Module> build_model(const ModelConfig& config, Rng& init_rng, Rng& dropout_rng);

// Every attention of a Seq2SeqModel or BertModel by its parameter path ("encoder.layers.0.self_attn",
// "decoder.layers.1.cross_attn"), encoder layers first, in layer order.
std::vector<std::pair<std::string, nn::MultiHeadAttention*>> named_attentions(nn::Module& model);

// Parameter counts grouped by module kind: layer indices fold together ("encoder.layers.*.ffn") and the
// tensor's own name is dropped, in first-seen order. Input: (name, element count) pairs.
std::vector<std::pair<std::string, int64_t>> group_parameter_counts(
    const std::vector<std::pair<std::string, int64_t>>& parameters);

}  // namespace hnas::models
