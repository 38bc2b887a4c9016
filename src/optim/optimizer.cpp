#include "optim/optimizer.h"

#include <algorithm>
#include <cmath>
#include <utility>
#include <vector>

#include "backend/kernels.h"
#include "backend/matmul.h"

namespace hnas::optim {

Optimizer::Optimizer(std::vector<nn::NamedParameter> parameters, const OptimizerOptions& options)
    : parameters_(std::move(parameters)), options_(options) {
    for (const auto& named : parameters_) {
        rate_scales_.push_back(named.role == nn::ParameterRole::hybrid_gate ? options.gate_rate_scale : 1.0f);
        weights_.push_back(named.role == nn::ParameterRole::weight);
        decayed_.push_back(options.weight_decay > 0.0f && weights_.back());
        first_moment_.push_back(Tensor::zeros(named.parameter.shape()));
        second_moment_.push_back(Tensor::zeros(named.parameter.shape()));
    }
}

namespace {

// The constants of one step of Adam or LAMB: the moments' decay rates, ε, the bias corrections
// (1 for ALBERT's LAMB), and the weight decay and gradient factor (clipping) of the tensor at hand.
struct MomentStep {
    float beta1, beta2, eps, correction1, correction2, decay, gradient_factor;
};

// The updates run over blocks of kUpdateBlock values, each block's new weights rounded to their bf16
// copy right after (while in L1) when the products read one: then no product converts a weight.
constexpr int64_t kUpdateBlock = 4096;

// One Adam update of n values. Adam adds decay·w to the gradient (L2); AdamW subtracts lr·decay·w from
// w directly. A function of plain values, one per kind: with the kind chosen inside the loop, or the
// arrays reached through a lambda's captures, GCC vectorized Adam's loop poorly or not at all (3x slower).
template <bool decoupled>
void adam_update(float* w, float* m, float* v, const float* g, int64_t n, MomentStep s, float learning_rate,
                 uint16_t* rounded) {
    const int64_t blocks = (n + kUpdateBlock - 1) / kUpdateBlock;
#pragma omp parallel for schedule(static) if (n >= kernels::kParallelGrain)
    for (int64_t b = 0; b < blocks; ++b) {
        const int64_t begin = b * kUpdateBlock, end = std::min(n, begin + kUpdateBlock);
#pragma omp simd
        for (int64_t i = begin; i < end; ++i) {
            const float clipped = g[i] * s.gradient_factor;
            const float gi = decoupled ? clipped : clipped + s.decay * w[i];
            m[i] = s.beta1 * m[i] + (1.0f - s.beta1) * gi;
            v[i] = s.beta2 * v[i] + (1.0f - s.beta2) * gi * gi;
            const float update = (m[i] / s.correction1) / (std::sqrt(v[i] / s.correction2) + s.eps);
            w[i] -= learning_rate * (decoupled ? update + s.decay * w[i] : update);
        }
        kernels::round_row_to_bf16(w + begin, rounded == nullptr ? nullptr : rounded + begin, end - begin);
    }
}

// LAMB's update before the trust ratio, from the updated moments: r = m̂ / (√v̂ + ε) + λ·w.
inline float lamb_direction(float m, float v, float w, const MomentStep& s) {
    return (m / s.correction1) / (std::sqrt(v / s.correction2) + s.eps) + s.decay * w;
}

// LAMB's first pass over n values: the moments updated, and ‖w‖² and ‖r‖² returned. The squares are
// summed per block of kNormBlock values and the blocks in order, so the sums are the same whatever the
// thread count; the second pass recomputes r rather than storing it.
constexpr int64_t kNormBlock = 1 << 14;
std::pair<double, double> lamb_moments(const float* w, float* m, float* v, const float* g, int64_t n, MomentStep s) {
    const int64_t blocks = (n + kNormBlock - 1) / kNormBlock;
    std::vector<double> weight_squares(static_cast<size_t>(blocks)), update_squares(static_cast<size_t>(blocks));
#pragma omp parallel for schedule(static) if (n >= kernels::kParallelGrain)
    for (int64_t b = 0; b < blocks; ++b) {
        double weight_sum = 0.0, update_sum = 0.0;
        const int64_t end = std::min(n, (b + 1) * kNormBlock);
#pragma omp simd reduction(+ : weight_sum, update_sum)
        for (int64_t i = b * kNormBlock; i < end; ++i) {
            const float gi = g[i] * s.gradient_factor;
            m[i] = s.beta1 * m[i] + (1.0f - s.beta1) * gi;
            v[i] = s.beta2 * v[i] + (1.0f - s.beta2) * gi * gi;
            const float r = lamb_direction(m[i], v[i], w[i], s);
            weight_sum += static_cast<double>(w[i]) * w[i];
            update_sum += static_cast<double>(r) * r;
        }
        weight_squares[static_cast<size_t>(b)] = weight_sum;
        update_squares[static_cast<size_t>(b)] = update_sum;
    }
    double weight_total = 0.0, update_total = 0.0;
    for (int64_t b = 0; b < blocks; ++b) {
        weight_total += weight_squares[static_cast<size_t>(b)];
        update_total += update_squares[static_cast<size_t>(b)];
    }
    return {weight_total, update_total};
}

}  // namespace

void Optimizer::step(float learning_rate, std::span<const float> gradient_factors) {
    HNAS_CHECK(gradient_factors.empty() || gradient_factors.size() == parameters_.size(), "optimizer: ",
               gradient_factors.size(), " gradient factors for ", parameters_.size(), " parameters");
    ++step_;
    const float beta1 = options_.beta1, beta2 = options_.beta2, eps = options_.epsilon;
    const float correction1 = 1.0f - std::pow(beta1, static_cast<float>(step_));
    const float correction2 = 1.0f - std::pow(beta2, static_cast<float>(step_));
    for (size_t p = 0; p < parameters_.size(); ++p) {
        Var parameter = parameters_[p].parameter;
        const Tensor grad = parameter.grad();
        if (!grad.defined()) continue;
        const float decay = decayed_[p] ? options_.weight_decay : 0.0f;
        const float parameter_rate = learning_rate * rate_scales_[p];
        const float factor = gradient_factors.empty() ? 1.0f : gradient_factors[p];
        Tensor value = parameter.value();
        float* w = value.data();
        // Weights are products' operands: under bf16 their copies are written here (a bias or norm's
        // would go unread). Taken after data(), which marks the copy stale.
        uint16_t* rounded = weights_[p] ? backend::operand_copy_to_fill(value) : nullptr;
        float *m = first_moment_[p].data(), *v = second_moment_[p].data();
        const float* g = grad.data();
        const int64_t n = parameter.numel();
        if (options_.kind == OptimizerKind::lamb || options_.kind == OptimizerKind::lamb_albert) {
            // r = m̂ / (√v̂ + ε) + λ·w; w −= lr · (‖w‖ / ‖r‖) · r, the ratio 1 when either norm is 0.
            // ALBERT's: m and v uncorrected, and the ratio 1 on biases, norms and the other undecayed tensors.
            const bool albert = options_.kind == OptimizerKind::lamb_albert;
            const float c1 = albert ? 1.0f : correction1, c2 = albert ? 1.0f : correction2;
            const MomentStep step{beta1, beta2, eps, c1, c2, decay, factor};
            const auto [weight_squares, update_squares] = lamb_moments(w, m, v, g, n, step);
            const double weight_norm = std::sqrt(weight_squares), update_norm = std::sqrt(update_squares);
            const bool adapted = !albert || weights_[p];
            const float trust = adapted && weight_norm > 0.0 && update_norm > 0.0 ? static_cast<float>(weight_norm / update_norm)
                                                                                   : 1.0f;
            const float rate = parameter_rate * trust;
#pragma omp parallel for simd schedule(static) if (n >= kernels::kParallelGrain)
            for (int64_t i = 0; i < n; ++i) w[i] -= rate * lamb_direction(m[i], v[i], w[i], step);
            if (rounded != nullptr) kernels::convert_to_bf16(w, rounded, n);
            continue;
        }
        const MomentStep step{beta1, beta2, eps, correction1, correction2, decay, factor};
        if (options_.kind == OptimizerKind::adamw) {
            adam_update<true>(w, m, v, g, n, step, parameter_rate, rounded);
        } else {
            adam_update<false>(w, m, v, g, n, step, parameter_rate, rounded);
        }
    }
}

void Optimizer::zero_grad() {
    for (auto& named : parameters_) named.parameter.zero_grad();
}

void Optimizer::save(io::CheckpointWriter& writer) const {
    for (size_t p = 0; p < parameters_.size(); ++p) {
        writer.add_tensor(std::string(kMomentEntryPrefix) + "m/" + parameters_[p].name, first_moment_[p]);
        writer.add_tensor(std::string(kMomentEntryPrefix) + "v/" + parameters_[p].name, second_moment_[p]);
    }
}

void Optimizer::load(const io::Checkpoint& checkpoint, int64_t step) {
    for (size_t p = 0; p < parameters_.size(); ++p) {
        const Shape& shape = parameters_[p].parameter.shape();
        first_moment_[p] = checkpoint.tensor(std::string(kMomentEntryPrefix) + "m/" + parameters_[p].name, shape).clone();
        second_moment_[p] = checkpoint.tensor(std::string(kMomentEntryPrefix) + "v/" + parameters_[p].name, shape).clone();
    }
    step_ = step;
}

namespace {
double squared_norm(const Tensor& grad) {
    const float* g = grad.data();
    double sum = 0.0;
#pragma omp parallel for simd reduction(+ : sum) schedule(static) if (grad.numel() >= kernels::kParallelGrain)
    for (int64_t i = 0; i < grad.numel(); ++i) sum += static_cast<double>(g[i]) * g[i];
    return sum;
}
}  // namespace

GradientClip clip_factors(const std::vector<nn::NamedParameter>& parameters, double max_norm, ClipScope scope) {
    std::vector<double> squares(parameters.size(), 0.0);
    double total = 0.0;
    for (size_t p = 0; p < parameters.size(); ++p) {
        const Tensor grad = parameters[p].parameter.grad();
        if (grad.defined()) total += squares[p] = squared_norm(grad);
    }
    GradientClip clip{std::sqrt(total), std::vector<float>(parameters.size(), 1.0f)};
    if (max_norm <= 0.0) return clip;
    for (size_t p = 0; p < parameters.size(); ++p) {
        const double own = scope == ClipScope::global ? clip.norm : std::sqrt(squares[p]);
        if (own > max_norm) clip.factors[p] = static_cast<float>(max_norm / own);
    }
    return clip;
}

}  // namespace hnas::optim
