// Building a model from its config, and summarizing models by parameter count.
#pragma once

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "models/model.h"

namespace hnas::models {

// A Seq2SeqModel, a BertModel or a SymbolEncoder, as the config's architecture says.
std::unique_ptr<Model> build_model(const ModelConfig& config, Rng& init_rng, Rng& dropout_rng);

// Parameter counts grouped by module kind: layer indices fold together ("encoder.layers.*.ffn") and the
// tensor's own name is dropped, in first-seen order. Input: (name, element count) pairs.
std::vector<std::pair<std::string, int64_t>> group_parameter_counts(
    const std::vector<std::pair<std::string, int64_t>>& parameters);

}  // namespace hnas::models
