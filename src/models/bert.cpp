#include "models/bert.h"

#include <algorithm>

namespace hnas::models {

namespace {

constexpr int64_t kMaskedRowMultiple = 64;  // mlm_logits: the masked-LM head's rows round up to this

EmbeddingOptions bert_embedding_options(const ModelConfig& config) {
    EmbeddingOptions options = embedding_options(config, config.max_source_positions);
    options.segments = config.segments;
    options.norm = true;       // BERT normalizes the embedding sum always
    options.token_scale = 1.0f;  // and never scales it (model.scale_embeddings is seq2seq's)
    return options;
}

// A module holding one parameter, so the MLM head's bias gets the path "mlm_head.bias".
class Bias : public nn::Module {
public:
    explicit Bias(int64_t size) : value(register_parameter("bias", Tensor::zeros({size}), nn::ParameterRole::no_decay)) {}
    Var value;
};
}  // namespace

BertModel::BertModel(const ModelConfig& config, Rng& init_rng, Rng& dropout_rng)
    : TokenModel(config),
      tokens_(register_module("embeddings.tokens", std::make_unique<nn::Embedding>(config.vocab_size, config.width, 0.02f, init_rng))),
      embeddings_(register_module("embeddings", std::make_unique<EmbeddingSum>(config.width, bert_embedding_options(config),
                                                                               init_rng, dropout_rng))),
      pooler_([&]() -> nn::Linear& {
          // The masked-LM head comes before the pooler, so that the initial parameters of a
          // pretraining model do not depend on which other heads it has.
          const BertHeads& heads = config.bert_heads;
          if (heads.masked_lm) {
              mlm_dense_ = &register_module("mlm_head.dense", std::make_unique<nn::Linear>(config.width, config.width, init_rng));
              mlm_norm_ = &register_module("mlm_head.norm", std::make_unique<nn::LayerNorm>(config.width, config.layer_norm_eps));
              mlm_bias_ = register_module("mlm_head", std::make_unique<Bias>(config.vocab_size)).value;
          }
          return register_module("pooler.dense", std::make_unique<nn::Linear>(config.width, config.width, init_rng));
      }()) {
    HNAS_CHECK(config.architecture == Architecture::bert, "bert model: the config describes another architecture");
    encoder_ = register_encoder_stack(init_rng, dropout_rng);
    const BertHeads& heads = config.bert_heads;
    if (heads.sentence_order) {
        sentence_order_ = &register_module("sop_head", std::make_unique<nn::Linear>(config.width, 2, init_rng));
    }
    if (heads.classes > 0) {
        classifier_dropout_ = &register_module("classifier.dropout", std::make_unique<nn::Dropout>(config.residual_dropout, dropout_rng));
        classifier_ = &register_module("classifier", std::make_unique<nn::Linear>(config.width, heads.classes, init_rng));
    }
    if (heads.span) span_ = &register_module("span_head", std::make_unique<nn::Linear>(config.width, 2, init_rng));
    apply_weight_init(init_rng);
}

nn::Linear& BertModel::head(nn::Linear* linear, const char* name) const {
    HNAS_CHECK(linear != nullptr, "bert model: this model has no ", name, " head (model.bert_heads)");
    return *linear;
}

Var BertModel::encode(const Tensor& input_ids, const Tensor& segment_ids, const Tensor& valid,
                      const nn::TemplatePartners* partners) const {
    Var x = embeddings_.forward(tokens_, input_ids, segment_ids);  // (B, L, D)
    const ops::AttentionMask mask{valid, valid};
    return encoder_.forward(x, mask, partners);
}

std::vector<Var> BertModel::hidden_states(const Tensor& input_ids, const Tensor& segment_ids, const Tensor& valid) const {
    std::vector<Var> states{embeddings_.forward(tokens_, input_ids, segment_ids)};
    const ops::AttentionMask mask{valid, valid};
    nn::StackPriors priors;
    if (encoder_.prior) priors.self = encoder_.prior->forward(input_ids.dim(1), input_ids.dim(1));  // as EncoderStack::forward
    for (const auto* layer : encoder_.layers) states.push_back(layer->forward(states.back(), mask, Var(), {}, nullptr, priors, nullptr));
    return states;
}

Var BertModel::encode_tokens(const Tensor& ids, const Tensor& valid) const {
    return encode(ids, Tensor::zeros(ids.shape(), DType::i32), valid);
}

Var BertModel::mlm_logits(const Var& states, const Tensor& masked_positions) const {
    HNAS_CHECK(mlm_dense_ != nullptr, "bert model: this model has no masked-LM head");
    // Gathering the masked rows first keeps the vocabulary-sized logits to N rows, as BERT does. The
    // head runs on N rounded up to a multiple of kMaskedRowMultiple (repeats of the first masked row,
    // whose logits are dropped): N differs from batch to batch, and each N would be new matmul shapes
    // (docs/performance.md).
    const int64_t masked = masked_positions.numel();
    const int64_t rounded = (masked + kMaskedRowMultiple - 1) / kMaskedRowMultiple * kMaskedRowMultiple;
    Tensor positions = masked_positions;
    if (rounded > masked) {
        positions = Tensor::empty({rounded}, DType::i32);
        std::copy_n(masked_positions.ints(), masked, positions.ints());
        std::fill(positions.ints() + masked, positions.ints() + rounded, masked_positions.ints()[0]);
    }
    Var rows = ops::embedding(ops::reshape(states, {-1, config_.width}), positions);  // (N', D)
    Var hidden = mlm_norm_->forward(ops::gelu(mlm_dense_->forward(rows)));         // (N', D)
    Var logits = ops::linear(hidden, tokens_.weight(), mlm_bias_);                 // (N', V)
    return rounded > masked ? ops::slice(logits, 0, 0, masked) : logits;          // (N, V)
}

Var BertModel::pooled(const Var& states) const {
    Var first = ops::reshape(ops::slice(states, 1, 0, 1), {states.dim(0), config_.width});  // (B, D)
    return ops::tanh(pooler_.forward(first));
}

Var BertModel::sentence_order_logits(const Var& pooled) const { return head(sentence_order_, "sentence-order").forward(pooled); }

Var BertModel::class_logits(const Var& pooled) const {
    return head(classifier_, "classification").forward(classifier_dropout_->forward(pooled));
}

SpanLogits BertModel::span_logits(const Var& states, const Tensor& valid) const {
    const int64_t batch = states.dim(0), length = states.dim(1);
    HNAS_CHECK(valid.shape() == Shape({batch, length}), "bert span head: valid has shape ", shape_str(valid.shape()),
               " but the states ", shape_str(states.shape()));
    // Padding can be neither start nor end: its logits move to kMaskedScore.
    Tensor padding = Tensor::empty({batch, length});
    for (int64_t i = 0; i < padding.numel(); ++i) padding.data()[i] = valid.data()[i] > 0.0f ? 0.0f : ops::kMaskedScore;
    const Var masked = Var(padding);
    Var both = head(span_, "span").forward(states);  // (B, L, 2)
    return {ops::add(ops::reshape(ops::slice(both, 2, 0, 1), {batch, length}), masked),
            ops::add(ops::reshape(ops::slice(both, 2, 1, 2), {batch, length}), masked)};
}

Var regression_loss(const Var& outputs, const Tensor& targets) {
    const int64_t batch = targets.numel();
    HNAS_CHECK(outputs.shape() == Shape({batch, 1}), "regression loss: outputs have shape ", shape_str(outputs.shape()),
               " but the targets ", shape_str(targets.shape()));
    const Var error = ops::sub(ops::reshape(outputs, {batch}), Var(targets));
    return ops::mean(ops::mul(error, error), 0);
}

Var span_loss(const SpanLogits& logits, const Tensor& start_positions, const Tensor& end_positions) {
    return ops::scale(ops::add(ops::cross_entropy(logits.start, start_positions), ops::cross_entropy(logits.end, end_positions)),
                      0.5f);
}

Var BertModel::mlm_loss(const Tensor& input_ids, const Tensor& segment_ids, const Tensor& valid,
                        const Tensor& masked_positions, const Tensor& masked_labels) const {
    Var states = encode(input_ids, segment_ids, valid);
    return ops::cross_entropy(mlm_logits(states, masked_positions), masked_labels, kPadId);
}

}  // namespace hnas::models
