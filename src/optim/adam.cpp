#include "optim/adam.h"

#include <cmath>

#include "backend/kernels.h"

namespace hnas::optim {

Adam::Adam(std::vector<nn::NamedParameter> parameters, std::vector<bool> decayed, AdamOptions options)
    : parameters_(std::move(parameters)), decayed_(std::move(decayed)), options_(options) {
    HNAS_CHECK(decayed_.size() == parameters_.size(), "adam: ", decayed_.size(), " decay flags for ",
               parameters_.size(), " parameters");
    for (const auto& named : parameters_) {
        first_moment_.push_back(Tensor::zeros(named.parameter.shape()));
        second_moment_.push_back(Tensor::zeros(named.parameter.shape()));
    }
}

void Adam::step() {
    ++step_;
    const float lr = options_.learning_rate, beta1 = options_.beta1, beta2 = options_.beta2;
    const float eps = options_.epsilon;
    const float correction1 = 1.0f - std::pow(beta1, static_cast<float>(step_));
    const float correction2 = 1.0f - std::pow(beta2, static_cast<float>(step_));
    for (size_t p = 0; p < parameters_.size(); ++p) {
        Var parameter = parameters_[p].parameter;
        const Tensor grad = parameter.grad();
        if (!grad.defined()) continue;
        const float decay = decayed_[p] ? lr * options_.weight_decay : 0.0f;
        float* w = parameter.value().data();
        float *m = first_moment_[p].data(), *v = second_moment_[p].data();
        const float* g = grad.data();
        const int64_t n = parameter.numel();
#pragma omp parallel for simd schedule(static) if (n >= kernels::kParallelGrain)
        for (int64_t i = 0; i < n; ++i) {
            m[i] = beta1 * m[i] + (1.0f - beta1) * g[i];
            v[i] = beta2 * v[i] + (1.0f - beta2) * g[i] * g[i];
            const float update = (m[i] / correction1) / (std::sqrt(v[i] / correction2) + eps);
            w[i] -= lr * update + decay * w[i];
        }
    }
}

void Adam::zero_grad() {
    for (auto& named : parameters_) named.parameter.zero_grad();
}

}  // namespace hnas::optim
