// The basic layers: Linear, Embedding, Dropout, LayerNorm and the position-wise FeedForward.
// Shapes: B batch, T positions, D model width, F feed-forward width, V vocabulary.
#pragma once

#include <optional>

#include "base/enum_names.h"
#include "nn/module.h"
#include "ops/ops.h"

namespace hnas::nn {

class Linear : public Module {
public:
    Linear(int64_t in_features, int64_t out_features, Rng& init_rng, bool with_bias = true);
    // (..., in) -> (..., out); `readers` says who reads the result (ops::ResultReaders).
    Var forward(const Var& x, ops::ResultReaders readers = ops::ResultReaders::any) const {
        return ops::linear(x, weight_, bias_, readers);
    }

    const Var& weight() const { return weight_; }
    const Var& bias() const { return bias_; }

private:
    Var weight_;  // (out, in)
    Var bias_;    // (out) or undefined
};

class Embedding : public Module {
public:
    Embedding(int64_t vocabulary, int64_t width, float init_stddev, Rng& init_rng);
    Var forward(const Tensor& ids) const { return ops::embedding(weight_, ids); }  // ids (...) -> (..., D)
    const Var& weight() const { return weight_; }

private:
    Var weight_;  // (V, D)
};

// Dropout is active only in training mode; the mask stream is the rng it is given.
class Dropout : public Module {
public:
    Dropout(float p, Rng& rng) : p_(p), rng_(rng) {}
    bool active() const { return training() && p_ > 0.0f; }
    // `readers`: who reads the result (ops::ResultReaders).
    Var forward(const Var& x, ops::ResultReaders readers = ops::ResultReaders::any) const {
        return active() ? ops::dropout(x, p_, rng_, readers) : x;
    }
    // residual + forward(branch), in one fused op while training.
    Var add_to(const Var& residual, const Var& branch) const {
        return active() ? ops::dropout_add(residual, branch, p_, rng_) : ops::add(residual, branch);
    }
    float active_probability() const { return active() ? p_ : 0.0f; }
    Rng& rng() const { return rng_; }

private:
    float p_;
    Rng& rng_;
};

class LayerNorm : public Module {
public:
    explicit LayerNorm(int64_t width, float eps = 1e-5f);
    Var forward(const Var& x) const { return ops::layer_norm(x, weight_, bias_, eps_); }
    // forward(dropout.add_to(residual, branch)), fused: a post-LN sublayer's end.
    Var forward_sum(const Var& residual, const Var& branch, const Dropout& dropout) const {
        return ops::dropout_add_layer_norm(residual, branch, dropout.active_probability(), dropout.rng(), weight_, bias_, eps_);
    }

private:
    Var weight_, bias_;
    float eps_;
};

enum class Activation { relu, gelu };
inline constexpr EnumName<Activation> kActivationNames[]{{Activation::relu, "relu"}, {Activation::gelu, "gelu"}};
constexpr const auto& enum_names(Activation) { return kActivationNames; }

// FFN(x) = W₂ · dropout(act(W₁·x + b₁)) + b₂, with W₁ (F, D) and W₂ (D, F); with a hidden norm
// (paper 002's MTE block), act(LN(W₁·x + b₁)).
class FeedForward : public Module {
public:
    FeedForward(int64_t width, int64_t hidden, Activation activation, float dropout, Rng& init_rng, Rng& dropout_rng,
                std::optional<float> hidden_norm_eps = std::nullopt);
    Var forward(const Var& x) const;

private:
    Linear& fc1_;
    Linear& fc2_;
    LayerNorm* hidden_norm_ = nullptr;
    Dropout& dropout_;
    Activation activation_;
};

}  // namespace hnas::nn
