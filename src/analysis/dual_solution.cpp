#include "analysis/dual_solution.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "analysis/vector_math.h"
#include "base/check.h"

namespace hnas::analysis {

namespace {

// Solves A x = b for a symmetric positive definite A (d × d, row-major) by Cholesky factorization.
Vector solve_positive_definite(Vector A, Vector b) {
    const auto d = static_cast<int64_t>(b.size());
    for (int64_t j = 0; j < d; ++j) {
        double diagonal = A[static_cast<size_t>(j * d + j)];
        for (int64_t k = 0; k < j; ++k) diagonal -= A[static_cast<size_t>(j * d + k)] * A[static_cast<size_t>(j * d + k)];
        HNAS_CHECK(diagonal > 0.0, "dual solver: the Newton system is not positive definite");
        const double root = std::sqrt(diagonal);
        A[static_cast<size_t>(j * d + j)] = root;
        for (int64_t i = j + 1; i < d; ++i) {
            double value = A[static_cast<size_t>(i * d + j)];
            for (int64_t k = 0; k < j; ++k) value -= A[static_cast<size_t>(i * d + k)] * A[static_cast<size_t>(j * d + k)];
            A[static_cast<size_t>(i * d + j)] = value / root;
        }
    }
    for (int64_t i = 0; i < d; ++i) {  // L y = b
        for (int64_t k = 0; k < i; ++k) b[static_cast<size_t>(i)] -= A[static_cast<size_t>(i * d + k)] * b[static_cast<size_t>(k)];
        b[static_cast<size_t>(i)] /= A[static_cast<size_t>(i * d + i)];
    }
    for (int64_t i = d - 1; i >= 0; --i) {  // Lᵀ x = y
        for (int64_t k = i + 1; k < d; ++k) b[static_cast<size_t>(i)] -= A[static_cast<size_t>(k * d + i)] * b[static_cast<size_t>(k)];
        b[static_cast<size_t>(i)] /= A[static_cast<size_t>(i * d + i)];
    }
    return b;
}

// μ + z, with μ the mean of u (p_λ at λ = 0).
Vector observation(const Cumulant& u, const Vector& z) {
    Vector mean, covariance;
    u.moments(Vector(z.size(), 0.0), mean, covariance);
    for (size_t i = 0; i < z.size(); ++i) mean[i] += z[i];
    return mean;
}

double objective(const Cumulant& u, const Vector& b, double alpha, const Vector& lambda) {
    return dot(lambda, b) - dot(lambda, lambda) / (2.0 * alpha) - u.value(lambda);
}

}  // namespace

DiscretePreference::DiscretePreference(Vector templates, int64_t dim, const Vector& log_weights)
    : templates_(std::move(templates)), dim_(dim), count_(static_cast<int64_t>(log_weights.size())) {
    HNAS_CHECK(dim_ > 0 && count_ > 0 && static_cast<int64_t>(templates_.size()) == count_ * dim_, "discrete preference: ",
               templates_.size(), " template values for ", count_, " templates of dimension ", dim_);
    const double top = *std::max_element(log_weights.begin(), log_weights.end());
    HNAS_CHECK(std::isfinite(top), "discrete preference: no template has a finite log-weight");
    double total = 0.0;
    for (double w : log_weights) total += std::exp(w - top);
    const double log_total = top + std::log(total);
    for (double w : log_weights) log_weights_.push_back(w - log_total);
}

Vector DiscretePreference::weights(const Vector& lambda) const {
    HNAS_CHECK(static_cast<int64_t>(lambda.size()) == dim_, "discrete preference: λ of dimension ", lambda.size(), " for templates of ",
               dim_);
    Vector logits(static_cast<size_t>(count_));
    for (int64_t i = 0; i < count_; ++i) {
        double s = log_weights_[static_cast<size_t>(i)];
        for (int64_t k = 0; k < dim_; ++k) s += templates_[static_cast<size_t>(i * dim_ + k)] * lambda[static_cast<size_t>(k)];
        logits[static_cast<size_t>(i)] = s;
    }
    const double top = *std::max_element(logits.begin(), logits.end());
    double total = 0.0;
    for (double& l : logits) total += (l = std::isfinite(l) ? std::exp(l - top) : 0.0);
    for (double& l : logits) l /= total;
    return logits;
}

double DiscretePreference::value(const Vector& lambda) const {
    double top = -std::numeric_limits<double>::infinity();
    Vector logits(static_cast<size_t>(count_));
    for (int64_t i = 0; i < count_; ++i) {
        double s = log_weights_[static_cast<size_t>(i)];
        for (int64_t k = 0; k < dim_; ++k) s += templates_[static_cast<size_t>(i * dim_ + k)] * lambda[static_cast<size_t>(k)];
        logits[static_cast<size_t>(i)] = s;
        top = std::max(top, s);
    }
    double total = 0.0;
    for (double l : logits) total += std::isfinite(l) ? std::exp(l - top) : 0.0;
    return top + std::log(total);
}

void DiscretePreference::moments(const Vector& lambda, Vector& mean, Vector& covariance) const {
    const Vector p = weights(lambda);
    mean.assign(static_cast<size_t>(dim_), 0.0);
    for (int64_t i = 0; i < count_; ++i)
        for (int64_t k = 0; k < dim_; ++k) mean[static_cast<size_t>(k)] += p[static_cast<size_t>(i)] * templates_[static_cast<size_t>(i * dim_ + k)];
    covariance.assign(static_cast<size_t>(dim_ * dim_), 0.0);
    Vector centred(static_cast<size_t>(dim_));
    for (int64_t i = 0; i < count_; ++i) {
        const double weight = p[static_cast<size_t>(i)];
        if (weight == 0.0) continue;
        for (int64_t k = 0; k < dim_; ++k) {
            centred[static_cast<size_t>(k)] = templates_[static_cast<size_t>(i * dim_ + k)] - mean[static_cast<size_t>(k)];
        }
        for (int64_t r = 0; r < dim_; ++r)
            for (int64_t c = 0; c <= r; ++c) {
                covariance[static_cast<size_t>(r * dim_ + c)] += weight * centred[static_cast<size_t>(r)] * centred[static_cast<size_t>(c)];
            }
    }
    for (int64_t r = 0; r < dim_; ++r)
        for (int64_t c = 0; c < r; ++c) covariance[static_cast<size_t>(c * dim_ + r)] = covariance[static_cast<size_t>(r * dim_ + c)];
}

double GaussianPreference::value(const Vector& lambda) const { return dot(mean_, lambda) + dot(lambda, lambda) / 2.0; }

void GaussianPreference::moments(const Vector& lambda, Vector& mean, Vector& covariance) const {
    const auto d = static_cast<int64_t>(mean_.size());
    mean = mean_;
    for (int64_t k = 0; k < d; ++k) mean[static_cast<size_t>(k)] += lambda[static_cast<size_t>(k)];
    covariance.assign(static_cast<size_t>(d * d), 0.0);
    for (int64_t k = 0; k < d; ++k) covariance[static_cast<size_t>(k * d + k)] = 1.0;
}

double dual_objective(const Cumulant& u, const Vector& z, double alpha, const Vector& lambda) {
    return objective(u, observation(u, z), alpha, lambda);
}

Vector estimate(const Cumulant& u, const Vector& lambda) {
    Vector mean, covariance;
    u.moments(lambda, mean, covariance);
    return mean;
}

DualSolution solve_dual(const Cumulant& u, const Vector& z, double alpha) {
    const int64_t d = u.dim();
    HNAS_CHECK(static_cast<int64_t>(z.size()) == d, "dual solver: evidence of dimension ", z.size(), " for a preference of ", d);
    HNAS_CHECK(alpha > 0.0 && std::isfinite(alpha), "dual solver: α ", alpha, " must be positive");
    const Vector b = observation(u, z);
    const double tolerance = 1e-10 * (1.0 + std::sqrt(dot(b, b)));
    DualSolution solution;
    solution.lambda = z;
    for (double& v : solution.lambda) v *= alpha;  // Eq. 16's approximation as the start
    Vector mean, covariance;
    for (;;) {
        u.moments(solution.lambda, mean, covariance);
        Vector gradient(static_cast<size_t>(d));
        for (int64_t k = 0; k < d; ++k) {
            gradient[static_cast<size_t>(k)] = b[static_cast<size_t>(k)] - solution.lambda[static_cast<size_t>(k)] / alpha - mean[static_cast<size_t>(k)];
        }
        solution.gradient_norm = std::sqrt(dot(gradient, gradient));
        if (solution.gradient_norm <= tolerance || solution.iterations == 100) return solution;
        for (int64_t k = 0; k < d; ++k) covariance[static_cast<size_t>(k * d + k)] += 1.0 / alpha;  // −Hessian
        const Vector step = solve_positive_definite(covariance, gradient);
        // Backtracking (Armijo) on the concave objective. Once the predicted gain gᵀ·step is below what
        // double resolves of the objective, the full Newton step is taken: the quadratic region.
        const double start = objective(u, b, alpha, solution.lambda), slope = dot(gradient, step);
        const bool resolvable = slope > 1e-13 * (1.0 + std::abs(start));
        double size = 1.0;
        Vector next(static_cast<size_t>(d));
        for (int halvings = 0; halvings < 60; ++halvings, size /= 2.0) {
            for (int64_t k = 0; k < d; ++k) next[static_cast<size_t>(k)] = solution.lambda[static_cast<size_t>(k)] + size * step[static_cast<size_t>(k)];
            if (!resolvable || objective(u, b, alpha, next) >= start + 1e-4 * size * slope) break;
        }
        solution.lambda = next;
        ++solution.iterations;
    }
}

}  // namespace hnas::analysis
