// Adam with decoupled weight decay (AdamW, Loshchilov & Hutter 2019); weight_decay 0 is plain Adam.
// Parameters listed in `no_decay` (biases, layer norms, hybrid weights) are never decayed.
#pragma once

#include <string>
#include <vector>

#include "nn/module.h"

namespace hnas::optim {

struct AdamOptions {
    float learning_rate = 1e-3f;
    float beta1 = 0.9f;
    float beta2 = 0.999f;
    float epsilon = 1e-8f;
    float weight_decay = 0.0f;
};

class Adam {
public:
    // decayed[i] says whether parameters[i] gets weight decay.
    Adam(std::vector<nn::NamedParameter> parameters, std::vector<bool> decayed, AdamOptions options);

    // One update from the parameters' accumulated gradients; parameters without a gradient are skipped.
    void step();
    void zero_grad();
    void set_learning_rate(float learning_rate) { options_.learning_rate = learning_rate; }
    int64_t steps_taken() const { return step_; }

private:
    std::vector<nn::NamedParameter> parameters_;
    std::vector<bool> decayed_;
    std::vector<Tensor> first_moment_, second_moment_;
    AdamOptions options_;
    int64_t step_ = 0;
};

}  // namespace hnas::optim
