// What a training run will hold in memory, estimated from the config before anything is built, so a
// model that cannot fit is refused at once with the numbers (instead of allocating for a while and
// failing in the middle of a step).
#pragma once

#include <cstdint>

#include "models/model_config.h"

namespace hnas::models {

// The largest batch the data settings allow.
struct BatchShape {
    int64_t rows = 0;
    int64_t source_length = 0;      // seq2seq: article pieces; bert: sequence length
    int64_t target_length = 0;      // seq2seq: decoder positions; bert: 0
    int64_t predicted_tokens = 0;   // rows whose logits are computed (seq2seq: rows × target; bert: masked)
};

struct MemoryEstimate {
    int64_t parameters = 0;
    // Values, gradients and the optimizer's two moments: four f32 copies of every parameter.
    int64_t parameter_bytes = 0;
    // What autograd keeps from one batch's forward pass for its backward pass.
    int64_t activation_bytes = 0;
    int64_t total_bytes() const { return parameter_bytes + activation_bytes; }
};

// Counts the parameters of the embeddings, layers and heads (per-head scalars of the attention kinds,
// a few per layer, are left out) and the tensors each layer keeps for the backward pass.
MemoryEstimate estimate_training_memory(const ModelConfig& config, const BatchShape& batch);

}  // namespace hnas::models
