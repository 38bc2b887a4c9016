#include "models/symbol_encoder.h"

namespace hnas::models {

namespace {
int64_t output_width(const ModelConfig& config) {
    return config.symbol_output.per_position ? 1 : config.symbol_output.classes;
}
}  // namespace

SymbolEncoder::SymbolEncoder(const ModelConfig& config, Rng& init_rng, Rng& dropout_rng)
    : TokenModel(config),
      tokens_(register_module("embedding", std::make_unique<nn::Embedding>(config.vocab_size, config.width, 0.02f, init_rng))),
      embeddings_(register_module("encoder", std::make_unique<EmbeddingSum>(
                                                 config.width, embedding_options(config, config.max_source_positions), init_rng,
                                                 dropout_rng))),
      encoder_(register_encoder_stack(init_rng, dropout_rng)) {
    HNAS_CHECK(config.architecture == Architecture::symbols, "symbol encoder: the config describes another architecture");
    HNAS_CHECK(output_width(config) > 0, "symbol encoder: the output has no classes (model.symbol_output)");
    output_ = &register_module("output", std::make_unique<nn::Linear>(config.width, output_width(config), init_rng));
    apply_weight_init(init_rng);
}

Var SymbolEncoder::encode_tokens(const Tensor& ids, const Tensor& valid) const {
    Var x = embeddings_.forward(tokens_, ids);  // (B, L, D)
    return encoder_.forward(x, {valid, valid});
}

Var SymbolEncoder::logits(const Tensor& ids) const {
    HNAS_CHECK(ids.rank() == 2, "symbol encoder: ids must be (B, L), got ", shape_str(ids.shape()));
    const int64_t batch = ids.dim(0), length = ids.dim(1);
    const Var states = encode_tokens(ids, Tensor());  // (B, L, D): no padding, every position real
    if (config_.symbol_output.per_position) return ops::reshape(output_->forward(states), {batch, length});  // (B, L)
    const Var first = ops::reshape(ops::slice(states, 1, 0, 1), {batch, config_.width});                     // (B, D)
    const Var logits = output_->forward(first);                                                               // (B, C)
    // First-token case distinction predicts a position: only the sequence's own positions are classes.
    return config_.symbol_output.positions ? ops::slice(logits, 1, 0, std::min(config_.symbol_output.classes, length)) : logits;
}

}  // namespace hnas::models
