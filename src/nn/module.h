// Module: the unit models are built from. A module declares its parameters and children *by name*
// where it creates them; named_parameters() walks the tree and yields dotted paths such as
// "encoder.layers.3.self_attn.q_proj.weight", the names checkpoints and PyTorch fixtures share.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "autograd/variable.h"
#include "base/rng.h"

namespace hnas::nn {

// What the optimizer needs to know of a parameter, declared where the parameter is registered: a
// weight (decayed), a tensor weight decay leaves alone (biases, layer norms' gains, attention kinds'
// and priors' parameters), or hnas's gate θ (not decayed; its own rate, train.optimizer's
// gate_learning_rate_scale).
enum class ParameterRole { weight, no_decay, hybrid_gate };

struct NamedParameter {
    std::string name;
    Var parameter;
    ParameterRole role = ParameterRole::weight;
};

class Module {
public:
    Module() = default;
    Module(const Module&) = delete;
    Module& operator=(const Module&) = delete;
    virtual ~Module() = default;

    std::vector<NamedParameter> named_parameters() const;
    Var parameter(const std::string& dotted_name) const;  // throws naming the missing parameter
    int64_t parameter_count() const;
    void zero_grad();

    // Training mode turns dropout on; it propagates to children.
    void set_training(bool training);
    bool training() const { return training_; }

protected:
    Var register_parameter(const std::string& name, Tensor value, ParameterRole role = ParameterRole::weight);
    template <typename Child>
    Child& register_module(const std::string& name, std::unique_ptr<Child> child) {
        Child& reference = *child;
        children_.emplace_back(name, std::move(child));
        return reference;
    }
    // `shared` when given (a module that another owner registered and this one runs too, as the decoder
    // on the encoder's weights), else make()'s module registered as `name`.
    template <typename Child, typename Make>
    const Child& register_or_share(const std::string& name, const Child* shared, Make make) {
        return shared ? *shared : register_module(name, make());
    }

private:
    void collect(const std::string& prefix, std::vector<NamedParameter>& out) const;

    std::vector<NamedParameter> parameters_;
    std::vector<std::pair<std::string, std::unique_ptr<Module>>> children_;
    bool training_ = true;
};

// Weight initializers: uniform Xavier/Glorot for projections, normal for embeddings, and the normal
// truncated at 2σ (BERT's and paper 002's initializer for every matrix).
Tensor init_xavier_uniform(const Shape& shape, Rng& rng);
Tensor init_normal(const Shape& shape, float stddev, Rng& rng);
Tensor init_truncated_normal(const Shape& shape, float stddev, Rng& rng);

}  // namespace hnas::nn
