#include "models/bert.h"

#include "models/seq2seq.h"

namespace hnas::models {

namespace {
EmbeddingOptions bert_embedding_options(const ModelConfig& config) {
    EmbeddingOptions options;
    options.max_positions = config.max_source_positions;
    options.positions = config.positions;
    options.segments = config.segments;
    options.norm = true;
    options.dropout = config.embedding_dropout;
    return options;
}

// A module holding one parameter, so the MLM head's bias gets the path "mlm_head.bias".
class Bias : public nn::Module {
public:
    explicit Bias(int64_t size) : value(register_parameter("bias", Tensor::zeros({size}))) {}
    Var value;
};
}  // namespace

BertModel::BertModel(const ModelConfig& config, Rng& init_rng, Rng& dropout_rng)
    : config_(config),
      tokens_(register_module("embeddings.tokens", std::make_unique<nn::Embedding>(config.vocab_size, config.width, 0.02f, init_rng))),
      embeddings_(register_module("embeddings", std::make_unique<EmbeddingSum>(config.width, bert_embedding_options(config),
                                                                               init_rng, dropout_rng))),
      mlm_dense_(register_module("mlm_head.dense", std::make_unique<nn::Linear>(config.width, config.width, init_rng))),
      mlm_norm_(register_module("mlm_head.norm", std::make_unique<nn::LayerNorm>(config.width))),
      mlm_bias_(register_module("mlm_head", std::make_unique<Bias>(config.vocab_size)).value),
      pooler_(register_module("pooler.dense", std::make_unique<nn::Linear>(config.width, config.width, init_rng))) {
    HNAS_CHECK(config.architecture == Architecture::bert, "bert model: the config describes another architecture");
    for (size_t i = 0; i < static_cast<size_t>(config.encoder_layers); ++i) {
        layers_.push_back(&register_module(
            "encoder.layers." + std::to_string(i),
            std::make_unique<nn::TransformerLayer>(
                layer_options(config, config.encoder_attention, nn::AttentionRole::bidirectional, i, nullptr), init_rng,
                dropout_rng)));
    }
    if (config.pre_norm) final_norm_ = &register_module("encoder.final_norm", std::make_unique<nn::LayerNorm>(config.width));
}

Var BertModel::encode(const Tensor& input_ids, const Tensor& segment_ids, const Tensor& valid) const {
    Var x = embeddings_.forward(tokens_, input_ids, segment_ids);  // (B, L, D)
    const ops::AttentionMask mask{valid, valid};
    for (const auto* layer : layers_) x = layer->forward(x, mask);
    return final_norm_ ? final_norm_->forward(x) : x;
}

Var BertModel::mlm_logits(const Var& states, const Tensor& masked_positions) const {
    // Gathering the masked rows first keeps the vocabulary-sized logits to N rows, as BERT does.
    Var rows = ops::embedding(ops::reshape(states, {-1, config_.width}), masked_positions);  // (N, D)
    Var hidden = mlm_norm_.forward(ops::gelu(mlm_dense_.forward(rows)));                     // (N, D)
    return ops::linear(hidden, tokens_.weight(), mlm_bias_);                                  // (N, V)
}

Var BertModel::pooled(const Var& states) const {
    Var first = ops::reshape(ops::slice(states, 1, 0, 1), {states.dim(0), config_.width});  // (B, D)
    return ops::tanh(pooler_.forward(first));
}

Var BertModel::mlm_loss(const Tensor& input_ids, const Tensor& segment_ids, const Tensor& valid,
                        const Tensor& masked_positions, const Tensor& masked_labels) const {
    Var states = encode(input_ids, segment_ids, valid);
    return ops::cross_entropy(mlm_logits(states, masked_positions), masked_labels, kPadId);
}

}  // namespace hnas::models
