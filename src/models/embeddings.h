// Token + position (+ segment) embeddings shared by both model families: learned or sinusoidal
// positions, optional scaling by sqrt(width), optional layer norm, and embedding dropout.
#pragma once

#include "models/model_config.h"

namespace hnas::models {

// The fixed sinusoidal table of Vaswani et al. (2017), Sec. 3.5: PE(p, 2i) = sin(p / 10000^(2i/D)),
// PE(p, 2i+1) = cos(p / 10000^(2i/D)). (P, D)
Tensor sinusoidal_positions(int64_t positions, int64_t width);

struct EmbeddingOptions {
    int64_t max_positions = 0;
    PositionEncoding positions = PositionEncoding::learned;
    int64_t segments = 0;       // 0: no segment embeddings
    float token_scale = 1.0f;   // sqrt(D) for the seq2seq Transformer
    bool norm = false;
    float norm_eps = 1e-5f;
    float dropout = 0.0f;
    float init_stddev = 0.02f;  // of learned position and segment tables
};

// The embedding settings of a model config for a stack of `max_positions` positions, without segments.
EmbeddingOptions embedding_options(const ModelConfig& config, int64_t max_positions);

// Sums a token embedding (owned elsewhere, possibly shared) with this module's positions and segments.
class EmbeddingSum : public nn::Module {
public:
    EmbeddingSum(int64_t width, const EmbeddingOptions& options, Rng& init_rng, Rng& dropout_rng);
    // ids (B, T) at positions first_position.. -> (B, T, D); segment_ids (B, T) only when segments are
    // on. first_position > 0 is step-by-step decoding.
    Var forward(const nn::Embedding& tokens, const Tensor& ids, const Tensor& segment_ids = Tensor(),
                int64_t first_position = 0) const;

private:
    EmbeddingOptions options_;
    nn::Embedding* learned_positions_ = nullptr;
    Tensor fixed_positions_;  // (P, D) for sinusoidal
    nn::Embedding* segments_ = nullptr;
    nn::LayerNorm* norm_ = nullptr;
    nn::Dropout& dropout_;
};

}  // namespace hnas::models
