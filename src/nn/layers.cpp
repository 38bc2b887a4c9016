#include "nn/layers.h"

namespace hnas::nn {

Linear::Linear(int64_t in_features, int64_t out_features, Rng& init_rng, bool with_bias) {
    weight_ = register_parameter("weight", init_xavier_uniform({out_features, in_features}, init_rng));
    if (with_bias) bias_ = register_parameter("bias", Tensor::zeros({out_features}), ParameterRole::no_decay);
}

LayerNorm::LayerNorm(int64_t width, float eps) : eps_(eps) {
    weight_ = register_parameter("weight", Tensor::full({width}, 1.0f), ParameterRole::no_decay);
    bias_ = register_parameter("bias", Tensor::zeros({width}), ParameterRole::no_decay);
}

Embedding::Embedding(int64_t vocabulary, int64_t width, float init_stddev, Rng& init_rng) {
    weight_ = register_parameter("weight", init_normal({vocabulary, width}, init_stddev, init_rng));
}

FeedForward::FeedForward(int64_t width, int64_t hidden, Activation activation, float dropout, Rng& init_rng,
                         Rng& dropout_rng, std::optional<float> hidden_norm_eps)
    : fc1_(register_module("fc1", std::make_unique<Linear>(width, hidden, init_rng))),
      fc2_(register_module("fc2", std::make_unique<Linear>(hidden, width, init_rng))),
      dropout_(register_module("dropout", std::make_unique<Dropout>(dropout, dropout_rng))),
      activation_(activation) {
    if (hidden_norm_eps) hidden_norm_ = &register_module("hidden_norm", std::make_unique<LayerNorm>(hidden, *hidden_norm_eps));
}

Var FeedForward::forward(const Var& x) const {
    // fc2 is the activation's only reader, unless dropout comes between (it reads the f32 values); and
    // the dropout's only reader.
    using ops::ResultReaders;
    const ResultReaders readers = dropout_.active() ? ResultReaders::any : ResultReaders::products;
    Var hidden;  // (..., F)
    if (activation_ == Activation::gelu && !hidden_norm_) {
        hidden = ops::linear_gelu(x, fc1_.weight(), fc1_.bias(), ops::GeluForm::erf, readers);
    } else {
        hidden = fc1_.forward(x);
        if (hidden_norm_) hidden = hidden_norm_->forward(hidden);
        hidden = activation_ == Activation::gelu ? ops::gelu(hidden, ops::GeluForm::erf, readers) : ops::relu(hidden);
    }
    return fc2_.forward(dropout_.forward(hidden, ResultReaders::products));  // (..., D)
}

}  // namespace hnas::nn
