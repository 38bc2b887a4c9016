#include "models/embeddings.h"

#include <cmath>

namespace hnas::models {

Tensor sinusoidal_positions(int64_t positions, int64_t width) {
    Tensor table = Tensor::empty({positions, width});
    for (int64_t p = 0; p < positions; ++p)
        for (int64_t i = 0; i < width; ++i) {
            const double angle = static_cast<double>(p) / std::pow(10000.0, static_cast<double>(i - i % 2) / static_cast<double>(width));
            table.data()[p * width + i] = static_cast<float>(i % 2 == 0 ? std::sin(angle) : std::cos(angle));
        }
    return table;
}

EmbeddingOptions embedding_options(const ModelConfig& config, int64_t max_positions) {
    EmbeddingOptions options;
    options.max_positions = max_positions;
    options.positions = config.positions;
    options.token_scale = config.scale_embeddings ? std::sqrt(static_cast<float>(config.width)) : 1.0f;
    options.norm = config.embedding_norm;
    options.norm_eps = config.layer_norm_eps;
    options.dropout = config.embedding_dropout;
    return options;
}

EmbeddingSum::EmbeddingSum(int64_t width, const EmbeddingOptions& options, Rng& init_rng, Rng& dropout_rng)
    : options_(options),
      dropout_(register_module("dropout", std::make_unique<nn::Dropout>(options.dropout, dropout_rng))) {
    if (options.positions == PositionEncoding::learned) {
        learned_positions_ = &register_module(
            "positions", std::make_unique<nn::Embedding>(options.max_positions, width, options.init_stddev, init_rng));
    } else if (options.positions == PositionEncoding::sinusoidal) {
        fixed_positions_ = sinusoidal_positions(options.max_positions, width);
    }
    if (options.segments > 0) {
        segments_ = &register_module("segments",
                                     std::make_unique<nn::Embedding>(options.segments, width, options.init_stddev, init_rng));
    }
    if (options.norm) norm_ = &register_module("norm", std::make_unique<nn::LayerNorm>(width, options.norm_eps));
}

Var EmbeddingSum::forward(const nn::Embedding& tokens, const Tensor& ids, const Tensor& segment_ids,
                          int64_t first_position) const {
    HNAS_CHECK(ids.rank() == 2, "embeddings: ids must be (B, T), got ", shape_str(ids.shape()));
    const int64_t length = ids.dim(1), end = first_position + length;
    HNAS_CHECK(first_position >= 0 && (options_.positions == PositionEncoding::none || end <= options_.max_positions),
               "embeddings: positions ", first_position, "..", end - 1, " exceed the ", options_.max_positions,
               " positions of the model");
    Var x = tokens.forward(ids);  // (B, T, D)
    if (options_.token_scale != 1.0f) x = ops::scale(x, options_.token_scale);
    std::vector<int32_t> position_ids(static_cast<size_t>(length));
    for (int64_t t = 0; t < length; ++t) position_ids[static_cast<size_t>(t)] = static_cast<int32_t>(first_position + t);
    const Tensor positions = Tensor::from_ints({1, length}, position_ids);
    if (learned_positions_) {
        x = ops::add(x, learned_positions_->forward(positions));  // (1, T, D) broadcast over B
    } else if (fixed_positions_.defined()) {
        x = ops::add(x, ops::slice(Var(fixed_positions_), 0, first_position, end));  // (T, D) broadcast over B
    }
    if (segments_) {
        HNAS_CHECK(segment_ids.defined() && segment_ids.shape() == ids.shape(), "embeddings: segment ids ",
                   shape_str(segment_ids.shape()), " must match ids ", shape_str(ids.shape()));
        x = ops::add(x, segments_->forward(segment_ids));
    }
    if (norm_) x = norm_->forward(x);
    return dropout_.forward(x);
}

}  // namespace hnas::models
