// Paper 003 §5–6: attention as the estimate ĥ of the problem (4), min_p α/2 ‖(μ + z) − E_p[a]‖² + KL(p‖u),
// and its Fenchel dual (Eq. 9):
//   λ* = argmax_λ ⟨λ, μ + z⟩ − ‖λ‖²/(2α) − log M(λ),   M(λ) = E_u[exp⟨a, λ⟩]   (Eq. 10),
// from which p̃ ∝ u·exp⟨a, λ*⟩ (Eq. 11) and ĥ = E_p̃[a] (Eq. 12). Attention (Eq. 18) is the
// approximation λ* ≈ αz (Eq. 16). The dual is concave with Hessian −I/α − Cov_p(a), so Newton's method
// with a backtracking line search finds λ* in a few steps; solve_dual does that in double.
#pragma once

#include <cstdint>
#include <vector>

namespace hnas::analysis {

using Vector = std::vector<double>;

// The cumulant log M(λ) of a preference distribution u with its derivatives: the gradient is the mean
// of p_λ ∝ u·exp⟨a, λ⟩ (Eq. 11), the Hessian its covariance.
class Cumulant {
public:
    virtual ~Cumulant() = default;
    virtual int64_t dim() const = 0;
    virtual double value(const Vector& lambda) const = 0;
    // p_λ's mean (d) and covariance (d × d, row-major).
    virtual void moments(const Vector& lambda, Vector& mean, Vector& covariance) const = 0;
};

// u discrete: templates t_1 … t_n (n × d, row-major) with weights u_i ∝ exp(log_weights_i) (Eq. 18).
class DiscretePreference : public Cumulant {
public:
    DiscretePreference(Vector templates, int64_t dim, const Vector& log_weights);
    int64_t dim() const override { return dim_; }
    double value(const Vector& lambda) const override;
    void moments(const Vector& lambda, Vector& mean, Vector& covariance) const override;
    // p_λ over the templates.
    Vector weights(const Vector& lambda) const;

private:
    Vector templates_, log_weights_;  // log_weights_ normalized: Σ_i exp = 1
    int64_t dim_, count_;
};

// u = N(μ, I), the motivating example of §5: log M(λ) = ⟨μ, λ⟩ + ‖λ‖²/2.
class GaussianPreference : public Cumulant {
public:
    explicit GaussianPreference(Vector mean) : mean_(std::move(mean)) {}
    int64_t dim() const override { return static_cast<int64_t>(mean_.size()); }
    double value(const Vector& lambda) const override;
    void moments(const Vector& lambda, Vector& mean, Vector& covariance) const override;

private:
    Vector mean_;
};

struct DualSolution {
    Vector lambda;
    int iterations = 0;
    double gradient_norm = 0.0;  // of Eq. 9's objective at lambda
};

// λ* of Eq. 9 for evidence z and α > 0, from the start λ = αz; stops when the gradient's norm is below
// 1e-10 · (1 + ‖μ + z‖) or after 100 Newton steps (its gradient_norm then says how far it got).
DualSolution solve_dual(const Cumulant& u, const Vector& z, double alpha);
// ĥ of Eq. 12 for a given λ: the mean of p_λ (with λ = αz, Eq. 18's attention output).
Vector estimate(const Cumulant& u, const Vector& lambda);
// Eq. 9's objective at λ.
double dual_objective(const Cumulant& u, const Vector& z, double alpha, const Vector& lambda);

}  // namespace hnas::analysis
