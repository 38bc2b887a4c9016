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

// The constants of one step of Adam or LAMB: the moments' decay rates, ε, the bias corrections c1, c2 (1
// for ALBERT's LAMB) as 1/c1 and 1/√c2, and the weight decay and gradient factor (clipping) of the tensor.
struct MomentStep {
    float beta1, beta2, eps, inverse_correction1, inverse_root_correction2, decay, gradient_factor;
};

// m̂ / (√v̂ + ε) with m̂ = m/c1 and √v̂ = √v/√c2 (PyTorch's order), the corrections applied as scalar
// products: one division an element where dividing by c1 and c2 took three (LAMB's passes were bound by
// them; Adam's is bound by memory).
inline float moment_ratio(float m, float v, const MomentStep& s) {
    return m * s.inverse_correction1 / (std::sqrt(v) * s.inverse_root_correction2 + s.eps);
}

// The updates run over blocks of kUpdateBlock values, each block's new weights rounded to their bf16
// copy right after (while in L1) when the products read one: then no product converts a weight.
constexpr int64_t kUpdateBlock = 4096;

// One Adam update of the values begin … end − 1. Adam adds decay·w to the gradient (L2); AdamW subtracts
// lr·decay·w from w directly. A function of plain values, one per kind: with the kind chosen inside the
// loop, or the arrays reached through a lambda's captures, GCC vectorized Adam's loop poorly or not at
// all (3x slower).
template <bool decoupled>
void adam_stretch(float* w, float* m, float* v, const float* g, int64_t begin, int64_t end, MomentStep s,
                  float learning_rate, uint16_t* rounded) {
#pragma omp simd
    for (int64_t i = begin; i < end; ++i) {
        const float clipped = g[i] * s.gradient_factor;
        const float gi = decoupled ? clipped : clipped + s.decay * w[i];
        m[i] = s.beta1 * m[i] + (1.0f - s.beta1) * gi;
        v[i] = s.beta2 * v[i] + (1.0f - s.beta2) * gi * gi;
        const float update = moment_ratio(m[i], v[i], s);
        w[i] -= learning_rate * (decoupled ? update + s.decay * w[i] : update);
    }
    kernels::round_row_to_bf16(w + begin, rounded == nullptr ? nullptr : rounded + begin, end - begin);
}

// A stretch of one parameter's values. Adam's update and the clipping norm run over the stretches of
// every parameter with a gradient in one parallel region: one barrier a step, not one per tensor.
struct Stretch {
    size_t parameter;
    int64_t begin, end;
};

std::vector<Stretch> stretches_of(const std::vector<nn::NamedParameter>& parameters, int64_t length) {
    std::vector<Stretch> stretches;
    for (size_t p = 0; p < parameters.size(); ++p) {
        if (!parameters[p].parameter.grad().defined()) continue;
        const int64_t n = parameters[p].parameter.numel();
        for (int64_t begin = 0; begin < n; begin += length) stretches.push_back({p, begin, std::min(n, begin + length)});
    }
    return stretches;
}

int64_t values_in(const std::vector<Stretch>& stretches) {
    int64_t total = 0;
    for (const Stretch& stretch : stretches) total += stretch.end - stretch.begin;
    return total;
}

// LAMB's update before the trust ratio, from the updated moments: r = m̂ / (√v̂ + ε) + λ·w.
inline float lamb_direction(float m, float v, float w, const MomentStep& s) {
    return moment_ratio(m, v, s) + s.decay * w;
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

// One tensor's update as Optimizer::step prepares it: its arrays (g null when it has no gradient), the
// bf16 copy to fill (or null), its rate and its step's constants.
struct TensorUpdate {
    float *w = nullptr, *m = nullptr, *v = nullptr;
    const float* g = nullptr;
    uint16_t* rounded = nullptr;
    int64_t n = 0;
    float rate = 0.0f;
    MomentStep step{};
};

// LAMB on one tensor: r = m̂ / (√v̂ + ε) + λ·w; w −= lr · (‖w‖ / ‖r‖) · r, the ratio 1 when either norm is
// 0 or the tensor is not `adapted`.
void lamb_step(const TensorUpdate& u, bool adapted) {
    const auto [weight_squares, update_squares] = lamb_moments(u.w, u.m, u.v, u.g, u.n, u.step);
    const double weight_norm = std::sqrt(weight_squares), update_norm = std::sqrt(update_squares);
    const float trust =
        adapted && weight_norm > 0.0 && update_norm > 0.0 ? static_cast<float>(weight_norm / update_norm) : 1.0f;
    const float rate = u.rate * trust;
    float* w = u.w;
    const float *m = u.m, *v = u.v;
    const MomentStep step = u.step;
#pragma omp parallel for simd schedule(static) if (u.n >= kernels::kParallelGrain)
    for (int64_t i = 0; i < u.n; ++i) w[i] -= rate * lamb_direction(m[i], v[i], w[i], step);
    if (u.rounded != nullptr) kernels::convert_to_bf16(w, u.rounded, u.n);
}

}  // namespace

void Optimizer::step(float learning_rate, std::span<const float> gradient_factors) {
    HNAS_CHECK(gradient_factors.empty() || gradient_factors.size() == parameters_.size(), "optimizer: ",
               gradient_factors.size(), " gradient factors for ", parameters_.size(), " parameters");
    ++step_;
    const bool lamb = options_.kind == OptimizerKind::lamb || options_.kind == OptimizerKind::lamb_albert;
    // ALBERT's LAMB leaves m and v uncorrected.
    const bool corrected = options_.kind != OptimizerKind::lamb_albert;
    const float correction1 = corrected ? 1.0f - std::pow(options_.beta1, static_cast<float>(step_)) : 1.0f;
    const float correction2 = corrected ? 1.0f - std::pow(options_.beta2, static_cast<float>(step_)) : 1.0f;
    std::vector<TensorUpdate> updates(parameters_.size());
    for (size_t p = 0; p < parameters_.size(); ++p) {
        const Tensor grad = parameters_[p].parameter.grad();
        if (!grad.defined()) continue;
        Tensor value = parameters_[p].parameter.value();
        TensorUpdate& u = updates[p];
        u.w = value.data();
        // Weights are products' operands: under bf16 their copies are written here (a bias or norm's
        // would go unread). Taken after data(), which marks the copy stale.
        u.rounded = weights_[p] ? backend::operand_copy_to_fill(value) : nullptr;
        u.m = first_moment_[p].data();
        u.v = second_moment_[p].data();
        u.g = grad.data();
        u.n = value.numel();
        u.rate = learning_rate * rate_scales_[p];
        u.step = {options_.beta1, options_.beta2, options_.epsilon, 1.0f / correction1, 1.0f / std::sqrt(correction2),
                  decayed_[p] ? options_.weight_decay : 0.0f, gradient_factors.empty() ? 1.0f : gradient_factors[p]};
    }
    if (lamb) {
        for (size_t p = 0; p < parameters_.size(); ++p) {
            // ALBERT's LAMB: the trust ratio 1 on biases, norms and the other tensors decay skips.
            if (updates[p].g) lamb_step(updates[p], options_.kind == OptimizerKind::lamb || weights_[p]);
        }
        return;
    }
    const std::vector<Stretch> stretches = stretches_of(parameters_, kUpdateBlock);
    const auto count = static_cast<int64_t>(stretches.size());
    const bool decoupled = options_.kind == OptimizerKind::adamw;
#pragma omp parallel for schedule(static) if (values_in(stretches) >= kernels::kParallelGrain)
    for (int64_t i = 0; i < count; ++i) {
        const Stretch& stretch = stretches[static_cast<size_t>(i)];
        const TensorUpdate& u = updates[stretch.parameter];
        if (decoupled) {
            adam_stretch<true>(u.w, u.m, u.v, u.g, stretch.begin, stretch.end, u.step, u.rate, u.rounded);
        } else {
            adam_stretch<false>(u.w, u.m, u.v, u.g, stretch.begin, stretch.end, u.step, u.rate, u.rounded);
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

GradientClip clip_factors(const std::vector<nn::NamedParameter>& parameters, double max_norm, ClipScope scope) {
    // Each stretch's squares summed apart, then each tensor's stretches in order: the same sums on any
    // number of threads, from one parallel region.
    const std::vector<Stretch> stretches = stretches_of(parameters, kNormBlock);
    std::vector<const float*> grads(parameters.size(), nullptr);
    for (size_t p = 0; p < parameters.size(); ++p) {
        const Tensor grad = parameters[p].parameter.grad();
        if (grad.defined()) grads[p] = grad.data();
    }
    std::vector<double> stretch_squares(stretches.size());
    const auto count = static_cast<int64_t>(stretches.size());
#pragma omp parallel for schedule(static) if (values_in(stretches) >= kernels::kParallelGrain)
    for (int64_t i = 0; i < count; ++i) {
        const Stretch& stretch = stretches[static_cast<size_t>(i)];
        const float* g = grads[stretch.parameter];
        double sum = 0.0;
#pragma omp simd reduction(+ : sum)
        for (int64_t j = stretch.begin; j < stretch.end; ++j) sum += static_cast<double>(g[j]) * g[j];
        stretch_squares[static_cast<size_t>(i)] = sum;
    }
    std::vector<double> squares(parameters.size(), 0.0);
    for (size_t i = 0; i < stretches.size(); ++i) squares[stretches[i].parameter] += stretch_squares[i];
    double total = 0.0;
    for (const double square : squares) total += square;
    GradientClip clip{std::sqrt(total), std::vector<float>(parameters.size(), 1.0f)};
    if (max_norm <= 0.0) return clip;
    for (size_t p = 0; p < parameters.size(); ++p) {
        const double own = scope == ClipScope::global ? clip.norm : std::sqrt(squares[p]);
        if (own > max_norm) clip.factors[p] = static_cast<float>(max_norm / own);
    }
    return clip;
}

}  // namespace hnas::optim
