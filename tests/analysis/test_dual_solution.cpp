// Paper 003's Fenchel dual (Eq. 9) solved by Newton's method (src/analysis/dual_solution.h): on a
// Gaussian u against §5's closed form, on a discrete u against plain gradient ascent run to
// convergence (a generic optimizer sharing no code with the solver), and Theorem 2's limit: as α
// shrinks, λ* approaches αz. §8's re-parameterization rebuilds a head's weights exactly.
#include <cmath>

#include "analysis/dual_deviation.h"
#include "analysis/dual_solution.h"
#include "base/rng.h"
#include "nn/attention.h"
#include "nn/attention_probe.h"
#include "test_support.h"

namespace hnas::analysis {
namespace {

Vector random_vector(int64_t n, Rng& rng, double scale = 1.0) {
    Vector v(static_cast<size_t>(n));
    for (double& x : v) x = scale * rng.normal();
    return v;
}

double distance(const Vector& a, const Vector& b) {
    double sum = 0.0;
    for (size_t i = 0; i < a.size(); ++i) sum += (a[i] - b[i]) * (a[i] - b[i]);
    return std::sqrt(sum);
}

double norm(const Vector& a) { return distance(a, Vector(a.size(), 0.0)); }

// §5: u = N(μ, I) gives λ* = α/(1 + α)·(b − μ) with b = μ + z, and ĥ = μ/(1 + α) + α/(1 + α)·b.
TEST(DualSolution, GaussianPreferenceHasTheClosedFormOfSection5) {
    Rng rng(3);
    const Vector mu = random_vector(4, rng), z = random_vector(4, rng, 2.0);
    const GaussianPreference u(mu);
    for (double alpha : {0.1, 0.5, 1.0, 2.0, 10.0}) {
        const DualSolution solution = solve_dual(u, z, alpha);
        const Vector h = estimate(u, solution.lambda);
        for (size_t k = 0; k < 4; ++k) {
            EXPECT_NEAR(solution.lambda[k], alpha / (1 + alpha) * z[k], 1e-10) << alpha;
            EXPECT_NEAR(h[k], mu[k] / (1 + alpha) + alpha / (1 + alpha) * (mu[k] + z[k]), 1e-10) << alpha;
        }
        EXPECT_LE(solution.iterations, 2) << "the objective is quadratic: one Newton step";
    }
}

// The same closed form through the discrete solver: N(μ, I) in the plane as templates on a uniform grid
// of spacing 0.4 over μ ± 10 with weights ∝ its density. The trapezoid rule on a Gaussian integrand
// converges faster than any power of the spacing, so the grid's cumulant is the Gaussian's to far below
// the tolerance for every λ the solver visits.
TEST(DualSolution, GaussianOnAGridMatchesSection5ThroughTheDiscreteSolver) {
    Rng rng(4);
    const Vector mu = random_vector(2, rng), z = random_vector(2, rng, 1.5);
    Vector templates, log_weights;
    for (int i = -25; i <= 25; ++i) {
        for (int j = -25; j <= 25; ++j) {
            const double dx = 0.4 * i, dy = 0.4 * j;
            templates.insert(templates.end(), {mu[0] + dx, mu[1] + dy});
            log_weights.push_back(-(dx * dx + dy * dy) / 2);
        }
    }
    const DiscretePreference u(templates, 2, log_weights);
    for (double alpha : {0.1, 0.5, 1.0, 2.0}) {
        const DualSolution solution = solve_dual(u, z, alpha);
        const Vector h = estimate(u, solution.lambda);
        for (size_t k = 0; k < 2; ++k) {
            EXPECT_NEAR(solution.lambda[k], alpha / (1 + alpha) * z[k], 1e-9) << alpha;
            EXPECT_NEAR(h[k], mu[k] / (1 + alpha) + alpha / (1 + alpha) * (mu[k] + z[k]), 1e-9) << alpha;
        }
    }
}

// Gradient ascent with a step under 1/L (L bounds the Hessian's norm: 1/α + the largest squared
// template norm), run until it no longer moves.
Vector gradient_ascent(const DiscretePreference& u, const Vector& templates, const Vector& z, double alpha) {
    double largest = 0.0;
    for (size_t i = 0; i + 2 < templates.size(); i += 3) {
        largest = std::max(largest, templates[i] * templates[i] + templates[i + 1] * templates[i + 1] + templates[i + 2] * templates[i + 2]);
    }
    const double step = 1.0 / (1.0 / alpha + largest);
    const Vector b = [&] {
        Vector mean = estimate(u, Vector(3, 0.0));
        for (size_t k = 0; k < 3; ++k) mean[k] += z[k];
        return mean;
    }();
    Vector lambda(3, 0.0);
    for (int iteration = 0; iteration < 200000; ++iteration) {
        const Vector m = estimate(u, lambda);
        for (size_t k = 0; k < 3; ++k) lambda[k] += step * (b[k] - lambda[k] / alpha - m[k]);
    }
    return lambda;
}

TEST(DualSolution, DiscretePreferenceMatchesGradientAscent) {
    Rng rng(5);
    for (int problem = 0; problem < 4; ++problem) {
        const Vector templates = random_vector(6 * 3, rng), log_weights = random_vector(6, rng), z = random_vector(3, rng, 1.5);
        const DiscretePreference u(templates, 3, log_weights);
        for (double alpha : {0.1, 0.5, 1.0, 2.0}) {
            const DualSolution newton = solve_dual(u, z, alpha);
            const Vector ascent = gradient_ascent(u, templates, z, alpha);
            EXPECT_LT(distance(newton.lambda, ascent), 1e-8) << problem << " α " << alpha;
            EXPECT_GE(dual_objective(u, z, alpha, newton.lambda), dual_objective(u, z, alpha, ascent) - 1e-12);
            // the damped phase can take a few dozen steps where p at αz is nearly one template (seen: 30)
            EXPECT_LE(newton.iterations, 50) << problem << " α " << alpha;
            EXPECT_LT(newton.gradient_norm, 1e-9);
        }
    }
}

// Theorem 2 (Eq. 16): λ* → αz as α → 0, the relative deviation shrinking with α; Eq. 15's
// α(I + αΣ)⁻¹z is closer still.
TEST(DualSolution, LambdaApproachesAlphaZAsAlphaShrinks) {
    Rng rng(7);
    const Vector templates = random_vector(5 * 3, rng), z = random_vector(3, rng);
    const DiscretePreference u(templates, 3, Vector(5, 0.0));
    double previous = 1e9;
    for (double alpha : {1.0, 0.3, 0.1, 0.03, 0.01}) {
        const DualSolution solution = solve_dual(u, z, alpha);
        Vector approximation = z;
        for (double& v : approximation) v *= alpha;
        const double deviation = distance(solution.lambda, approximation) / norm(solution.lambda);
        EXPECT_LT(deviation, previous) << alpha;
        previous = deviation;
    }
    EXPECT_LT(previous, 0.05);
}

// t_i = x̃_i·scale, z = K̃ᵀQ̃x̃_k, u from the priors: p at λ = αz is the head's weights, here summed over
// the real queries and held against the key weight sums the attention recorded (α 0.8, both priors on).
TEST(DualDeviation, QueryProblemsRebuildTheHeadsWeights) {
    nn::AttentionOptions options;
    options.width = 8;
    options.heads = 2;
    options.alpha = 0.8f;
    options.prior = nn::RelativePositionOptions{8, 16, true};
    options.context_prior = nn::ContextPreferenceOptions{5};
    Rng init(31), dropout(32);
    nn::MultiHeadAttention attention(options, init, dropout);
    for (const char* name : {"context_prior.head_weights", "relative_bias.weight"}) {
        Tensor& w = attention.parameter(name).value();
        const Tensor drawn = testing::random_tensor(w.shape(), 33, -1.0f, 1.0f);
        std::copy_n(drawn.data(), drawn.numel(), w.data());
    }
    const Tensor x = testing::random_tensor({2, 6, 8}, 34);
    const Tensor valid = Tensor::from_floats({2, 6}, {1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 0, 0});
    NoGradScope no_grad;
    const nn::AttentionProbe probe({&attention});
    attention.forward(Var(x), Var(x), {valid, valid});
    const nn::AttentionRecord& record = probe.record(attention);
    const Tensor& sums = record.key_weight_sums;  // (B, H, Lk)
    for (int64_t b = 0; b < 2; ++b)
        for (int64_t h = 0; h < 2; ++h) {
            const int64_t real = b == 0 ? 6 : 4;
            Vector rebuilt(static_cast<size_t>(real), 0.0);
            for (int64_t k = 0; k < real; ++k) {
                const QueryProblem problem = query_problem(attention, record, b, h, k);
                ASSERT_EQ(problem.dim, 9);
                ASSERT_EQ(problem.log_weights.size(), static_cast<size_t>(real));
                EXPECT_FLOAT_EQ(static_cast<float>(problem.alpha), 0.8f);
                const DiscretePreference u(problem.templates, problem.dim, problem.log_weights);
                Vector alpha_z = problem.z;
                for (double& v : alpha_z) v *= problem.alpha;
                const Vector p = u.weights(alpha_z);
                for (int64_t i = 0; i < real; ++i) rebuilt[static_cast<size_t>(i)] += p[static_cast<size_t>(i)];
            }
            for (int64_t i = 0; i < real; ++i) {
                EXPECT_NEAR(rebuilt[static_cast<size_t>(i)], sums.data()[(b * 2 + h) * 6 + i], 1e-5) << b << " " << h << " " << i;
            }
        }
}

TEST(DualSolution, BadInputsAreErrors) {
    const DiscretePreference u({1, 0, 0, 1}, 2, {0, 0});
    EXPECT_CONTAINS(testing::error_of([&] { solve_dual(u, {1, 2}, 0.0); }), "dual solver: α 0 must be positive");
    EXPECT_CONTAINS(testing::error_of([&] { solve_dual(u, {1, 2, 3}, 1.0); }), "evidence of dimension 3 for a preference of 2");
    EXPECT_CONTAINS(testing::error_of([&] { DiscretePreference({1, 2, 3}, 2, {0, 0}); }),
                    "discrete preference: 3 template values for 2 templates of dimension 2");
}

}  // namespace
}  // namespace hnas::analysis
