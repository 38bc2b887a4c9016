// The optimizers: Adam (Kingma & Ba 2015, weight decay as an L2 term in the gradient), AdamW (decoupled
// weight decay, Loshchilov & Hutter 2019), LAMB (You et al. 2019, Algorithm 2: Adam's update scaled
// per tensor by the trust ratio ‖w‖ / ‖update‖), and LAMB as ALBERT's code has it (lamb_optimizer.py,
// which paper 004 pretrained BERT with: no bias correction, and no trust ratio on the tensors weight
// decay skips; ALBERT ran it with ε 1e-6). Parameters are
// held by name; each one's nn::ParameterRole, declared where it was registered, says whether it is
// decayed and at which rate it steps. The moments travel in checkpoints, so a resumed run continues exactly.
#pragma once

#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "base/enum_names.h"
#include "io/checkpoint.h"
#include "nn/module.h"

namespace hnas::optim {

enum class OptimizerKind { adam, adamw, lamb, lamb_albert };
inline constexpr EnumName<OptimizerKind> kOptimizerKindNames[]{{OptimizerKind::adam, "adam"},
                                                               {OptimizerKind::adamw, "adamw"},
                                                               {OptimizerKind::lamb, "lamb"},
                                                               {OptimizerKind::lamb_albert, "lamb_albert"}};
constexpr const auto& enum_names(OptimizerKind) { return kOptimizerKindNames; }

// Checkpoint entries holding the moments are named with this prefix ("optimizer/m/<parameter>", "optimizer/v/…").
inline constexpr std::string_view kMomentEntryPrefix = "optimizer/";

struct OptimizerOptions {
    OptimizerKind kind = OptimizerKind::adamw;
    float beta1 = 0.9f, beta2 = 0.999f, epsilon = 1e-8f;
    float weight_decay = 0.0f;
    // hnas's gates θ (u = sigmoid(θ) per head) step at this multiple of the learning rate: Adam moves a
    // parameter by about the rate per step, so at fine-tuning rates u hardly moves in an epoch.
    float gate_rate_scale = 1.0f;
};

class Optimizer {
public:
    Optimizer(std::vector<nn::NamedParameter> parameters, const OptimizerOptions& options);

    // One update with the given learning rate from the accumulated gradients, each read times its
    // parameter's factor in `gradient_factors` when given (gradient clipping, applied as the update
    // reads the gradient rather than in a pass of its own); a parameter without a gradient (unused this
    // step) is left alone, its moments unchanged.
    void step(float learning_rate, std::span<const float> gradient_factors = {});
    void zero_grad();
    int64_t steps_taken() const { return step_; }

    // The moments as checkpoint entries "optimizer/m/<parameter>" and "optimizer/v/<parameter>"; the
    // step count is the caller's to store (it is the training step).
    void save(io::CheckpointWriter& writer) const;
    void load(const io::Checkpoint& checkpoint, int64_t step);

private:
    std::vector<nn::NamedParameter> parameters_;
    std::vector<bool> decayed_;
    std::vector<float> rate_scales_;  // per parameter: gate_rate_scale for the hybrid gates, else 1
    std::vector<bool> weights_;  // role weight: not a bias, norm or other tensor decay skips (ALBERT's LAMB adapts these)
    std::vector<Tensor> first_moment_, second_moment_;
    OptimizerOptions options_;
    int64_t step_ = 0;
};

// What a clipping norm bounds: all gradients together (their global L2 norm), or each tensor's on its
// own (TensorFlow's clip_by_norm per variable, as paper 002's code clipped BERT's gradients).
enum class ClipScope { global, per_tensor };
inline constexpr EnumName<ClipScope> kClipScopeNames[]{{ClipScope::global, "global"}, {ClipScope::per_tensor, "per_tensor"}};
constexpr const auto& enum_names(ClipScope) { return kClipScopeNames; }

// The gradients' global L2 norm, and the factor each parameter's gradient is to be scaled by (in the
// parameters' order, for Optimizer::step) so that the global norm (or each tensor's, per_tensor) is at
// most max_norm; every factor is 1 when max_norm ≤ 0 or the norm is within it. The norm is accumulated
// in double, in a fixed order: deterministic.
struct GradientClip {
    double norm = 0.0;
    std::vector<float> factors;
};
GradientClip clip_factors(const std::vector<nn::NamedParameter>& parameters, double max_norm,
                          ClipScope scope = ClipScope::global);

}  // namespace hnas::optim
