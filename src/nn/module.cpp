#include "nn/module.h"

#include <cmath>

#include "tensor/random.h"

namespace hnas::nn {

Var Module::register_parameter(const std::string& name, Tensor value, ParameterRole role) {
    for (const auto& existing : parameters_) {
        HNAS_CHECK(existing.name != name, "module: parameter '", name, "' registered twice");
    }
    Var parameter(std::move(value), true);
    parameters_.push_back({name, parameter, role});
    return parameter;
}

void Module::collect(const std::string& prefix, std::vector<NamedParameter>& out) const {
    for (const auto& [name, parameter, role] : parameters_) out.push_back({prefix + name, parameter, role});
    for (const auto& [name, child] : children_) child->collect(prefix + name + ".", out);
}

std::vector<NamedParameter> Module::named_parameters() const {
    std::vector<NamedParameter> out;
    collect("", out);
    return out;
}

Var Module::parameter(const std::string& dotted_name) const {
    for (const NamedParameter& named : named_parameters()) {
        if (named.name == dotted_name) return named.parameter;
    }
    throw Error("module: no parameter named '" + dotted_name + "'");
}

int64_t Module::parameter_count() const {
    int64_t total = 0;
    for (const auto& named : named_parameters()) total += named.parameter.numel();
    return total;
}

void Module::zero_grad() {
    for (auto& named : named_parameters()) named.parameter.zero_grad();
}

void Module::set_training(bool training) {
    training_ = training;
    for (auto& [name, child] : children_) child->set_training(training);
}

Tensor init_xavier_uniform(const Shape& shape, Rng& rng) {
    HNAS_CHECK(shape.size() == 2, "init_xavier_uniform: needs a matrix, got ", shape_str(shape));
    const float bound = std::sqrt(6.0f / static_cast<float>(shape[0] + shape[1]));
    return uniform_tensor(rng, shape, -bound, bound);
}

Tensor init_normal(const Shape& shape, float stddev, Rng& rng) { return normal_tensor(rng, shape, 0.0f, stddev); }

Tensor init_truncated_normal(const Shape& shape, float stddev, Rng& rng) {
    Tensor out = Tensor::empty(shape);
    for (int64_t e = 0; e < out.numel(); ++e) {
        float value = 0.0f;
        do value = rng.normal(); while (std::abs(value) > 2.0f);  // redrawn beyond 2σ, as TensorFlow's initializer
        out.data()[e] = stddev * value;
    }
    return out;
}

}  // namespace hnas::nn
