// Tests for the mode-collapse analyses (src/analysis/mode_collapse.*): the toy's attention weights
// against the papers' equations computed naively, Lemma 1 separating DNAS from LNAS, the 2-D experiment
// of paper 004 Fig. 6/8 (000 Figs. 5-6) with its documented defaults over several seeds, cluster
// counting, and paper 000 Eq. 11-12 against the 1-D simulation.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "analysis/mode_collapse.h"
#include "base/check.h"
#include "nn/attention_norm.h"
#include "test_support.h"

namespace {

using hnas::name_of;
using hnas::analysis::attention_weights;
using hnas::analysis::centre_distance_analysis;
using hnas::analysis::CentreDistanceOptions;
using hnas::analysis::dnas_centre_distance;
using hnas::analysis::find_clusters;
using hnas::analysis::lnas_centre_distance;
using hnas::analysis::ModeCollapseOptions;
using hnas::analysis::Normalization;
using hnas::analysis::Points;
using hnas::analysis::run_mode_collapse;
using hnas::analysis::simulate_centre_distance;
using hnas::analysis::ToyKind;

// Three 2-D points, the third far from the others, so the normalizations differ visibly.
const Points kThreePoints{2, {0.3, -0.2, 0.5, 0.1, -1.2, 0.9}};

// exp(scale <x_i, x_j>) without any stabilization: the papers' unnormalized weights.
std::vector<double> naive_exp_scores(const Points& points, double scale) {
    const size_t n = points.size();
    std::vector<double> e(n * n);
    for (size_t i = 0; i < n; ++i) {
        for (size_t j = 0; j < n; ++j) {
            e[i * n + j] = std::exp(scale * (points.point(i)[0] * points.point(j)[0] + points.point(i)[1] * points.point(j)[1]));
        }
    }
    return e;
}

std::vector<double> column_sums(const std::vector<double>& weights, size_t n) {
    std::vector<double> sums(n, 0.0);
    for (size_t i = 0; i < n; ++i) {
        for (size_t j = 0; j < n; ++j) sums[j] += weights[i * n + j];
    }
    return sums;
}

TEST(ModeCollapseWeights, LnasIsSoftmaxOverKeys) {
    const double scale = 1.5;
    const auto e = naive_exp_scores(kThreePoints, scale);
    const auto weights = attention_weights(kThreePoints, scale, {ToyKind::lnas});
    for (size_t i = 0; i < 3; ++i) {
        const double row_sum = e[i * 3] + e[i * 3 + 1] + e[i * 3 + 2];
        for (size_t j = 0; j < 3; ++j) EXPECT_NEAR(weights[i * 3 + j], e[i * 3 + j] / row_sum, 1e-14) << i << "," << j;
    }
}

TEST(ModeCollapseWeights, DnasNormalizesOverQueriesThenKeys) {
    const double scale = 1.5;
    const auto e = naive_exp_scores(kThreePoints, scale);
    // Eq. 7: xi_ji = exp(S_ij) / sum_i exp(S_ij); Eq. 8: W_ij = xi_ji / sum_j xi_ji.
    const auto key_sums = column_sums(e, 3);
    std::vector<double> xi(9);
    for (size_t k = 0; k < 9; ++k) xi[k] = e[k] / key_sums[k % 3];
    const auto weights = attention_weights(kThreePoints, scale, {ToyKind::dnas});
    const auto lower = attention_weights(kThreePoints, scale, {ToyKind::lnas});
    double largest_difference_from_lnas = 0.0;
    for (size_t i = 0; i < 3; ++i) {
        const double row_sum = xi[i * 3] + xi[i * 3 + 1] + xi[i * 3 + 2];
        for (size_t j = 0; j < 3; ++j) {
            EXPECT_NEAR(weights[i * 3 + j], xi[i * 3 + j] / row_sum, 1e-14) << i << "," << j;
            largest_difference_from_lnas = std::max(largest_difference_from_lnas, std::abs(weights[i * 3 + j] - lower[i * 3 + j]));
        }
    }
    EXPECT_GT(largest_difference_from_lnas, 0.05) << "the example must tell DNAS from LNAS";
}

TEST(ModeCollapseWeights, HnasMixesDnasAndLnas) {
    const double u = 0.3;
    const auto hybrid = attention_weights(kThreePoints, 1.0, {ToyKind::hnas, u});
    const auto upper = attention_weights(kThreePoints, 1.0, {ToyKind::dnas});
    const auto lower = attention_weights(kThreePoints, 1.0, {ToyKind::lnas});
    for (size_t k = 0; k < 9; ++k) EXPECT_NEAR(hybrid[k], u * upper[k] + (1 - u) * lower[k], 1e-15);
}

// The toy's double-precision kinds are the registered kinds' definitions (src/nn/attention_kinds/): on a
// random, non-symmetric score matrix (so normalizing over the wrong axis first shows), each agrees with
// the kind's fused normalize() and with its composed reference() to float precision.
TEST(ModeCollapseWeights, ToyKindsAreTheRegisteredKinds) {
    const size_t n = 7;
    std::mt19937 draw(45);
    std::uniform_real_distribution<float> score(-4.0f, 4.0f);
    std::vector<float> scores(n * n);
    for (float& s : scores) s = score(draw);
    const hnas::Var scores_var(hnas::Tensor::from_floats({1, 1, static_cast<int64_t>(n), static_cast<int64_t>(n)}, scores));
    const double u = 0.3;
    for (const ToyKind kind : {ToyKind::lnas, ToyKind::dnas, ToyKind::hnas}) {
        const auto toy = hnas::analysis::normalize_scores(std::vector<double>(scores.begin(), scores.end()), n, {kind, u});
        const auto norm = hnas::testing::make_attention_norm(std::string(name_of(kind)), 1, {{"hybrid_init", u}});
        for (const bool fused : {true, false}) {
            const hnas::Var weights = fused ? norm->normalize(scores_var, {}) : norm->reference(scores_var, {});
            ASSERT_EQ(weights.numel(), static_cast<int64_t>(n * n));
            for (size_t k = 0; k < n * n; ++k)
                EXPECT_NEAR(weights.value().data()[k], toy[k], 1e-6)
                    << name_of(kind) << (fused ? " normalize" : " reference") << " entry " << k;
        }
    }
}

// Lemma 1: with DNAS every key keeps a column sum of at least 1/L (L keys). Along a line, dot-product
// LNAS sends every query's weight to the far end, so the key at 0.5 is explained away.
TEST(ModeCollapseWeights, DnasKeepsEveryKeyLnasExplainsAway) {
    const Points line{1, {0.5, 1.0, 2.0, 3.0}};
    const auto lnas_sums = column_sums(attention_weights(line, 2.0, {ToyKind::lnas}), 4);
    const auto dnas_sums = column_sums(attention_weights(line, 2.0, {ToyKind::dnas}), 4);
    EXPECT_LT(lnas_sums[0], 0.5 / 4);
    for (size_t j = 0; j < 4; ++j) EXPECT_GE(dnas_sums[j], (1 - 1e-12) / 4) << "key " << j;
}

// The same properties on the toy's 550 sampled points: rows sum to 1, DNAS keys keep 1/L.
TEST(ModeCollapseWeights, ToyPointsRowsSumToOneAndDnasKeepsEveryKey) {
    const auto result = run_mode_collapse(ModeCollapseOptions{.steps = 0});
    const Points& points = result.runs[0].steps[0].points;
    const size_t n = points.size();
    ASSERT_EQ(n, 550u);
    for (const ToyKind kind : {ToyKind::lnas, ToyKind::dnas}) {
        const auto weights = attention_weights(points, 1.0, {kind});
        for (size_t i = 0; i < n; ++i) {
            double row_sum = 0.0;
            for (size_t j = 0; j < n; ++j) row_sum += weights[i * n + j];
            ASSERT_NEAR(row_sum, 1.0, 1e-12) << name_of(kind) << " query " << i;
        }
        if (kind == ToyKind::dnas) {
            const auto sums = column_sums(weights, n);
            for (size_t j = 0; j < n; ++j) ASSERT_GE(sums[j], (1 - 1e-12) / static_cast<double>(n)) << "key " << j;
        }
    }
}

TEST(ModeCollapseClusters, SingleLinkageWithStrayPoints) {
    // A chain of three points (each within 0.6 of the next, the ends 1.0 apart), a pair, and a lone point.
    const Points points{1, {0.0, 0.5, 1.0, 5.0, 5.2, 9.0}};
    const auto clustering = find_clusters(points, 0.6, 2);
    EXPECT_EQ(clustering.cluster_sizes, (std::vector<size_t>{3, 2}));
    EXPECT_EQ(clustering.stray_points, 1u);
    EXPECT_EQ(find_clusters(points, 0.6, 1).clusters(), 3u);
    EXPECT_EQ(find_clusters(points, 4.5, 1).clusters(), 1u);
}

// Two clusters, with at most 1 % of the points stray (a Gaussian's outliers at step 0).
void expect_two_clusters(const hnas::analysis::ModeCollapseStep& step, ToyKind kind, uint64_t seed) {
    EXPECT_EQ(step.clustering.clusters(), 2u) << name_of(kind) << " seed " << seed << " step " << step.step;
    EXPECT_LE(step.clustering.stray_points, step.points.size() / 100)
        << name_of(kind) << " seed " << seed << " step " << step.step;
}

// Paper 004 Fig. 6 (000 Fig. 6): 500 vs 50 points, LNAS one cluster after 4 steps, DNAS two.
TEST(ModeCollapseToy, UnbalancedLnasCollapsesDnasKeepsTwoClusters) {
    for (uint64_t seed = 1; seed <= 5; ++seed) {
        const auto result = run_mode_collapse(ModeCollapseOptions{.seed = seed});
        ASSERT_EQ(result.runs.size(), 2u);
        const auto& lnas = result.runs[0];
        const auto& dnas = result.runs[1];
        ASSERT_EQ(lnas.normalization.kind, ToyKind::lnas);
        ASSERT_EQ(dnas.normalization.kind, ToyKind::dnas);
        ASSERT_EQ(lnas.steps.size(), 5u);
        const double initial_distance = lnas.steps[0].centre_distance;
        EXPECT_NEAR(initial_distance, 3.2757, 0.1) << "seed " << seed;
        expect_two_clusters(lnas.steps[0], ToyKind::lnas, seed);
        EXPECT_EQ(lnas.steps.back().clustering.cluster_sizes, (std::vector<size_t>{550})) << "seed " << seed;
        EXPECT_LT(lnas.steps.back().centre_distance, 0.05 * initial_distance) << "seed " << seed;
        for (const auto& step : dnas.steps) expect_two_clusters(step, ToyKind::dnas, seed);
        EXPECT_GT(dnas.steps.back().centre_distance, 0.8 * initial_distance) << "seed " << seed;
    }
}

// Paper 004 Fig. 8 (000 Fig. 5): balanced clusters, 225 points each; neither normalization collapses.
TEST(ModeCollapseToy, BalancedBothKeepTwoClusters) {
    for (uint64_t seed = 1; seed <= 5; ++seed) {
        const auto result = run_mode_collapse(ModeCollapseOptions{.n0 = 225, .n1 = 225, .seed = seed});
        for (const auto& run : result.runs) {
            for (const auto& step : run.steps) expect_two_clusters(step, run.normalization.kind, seed);
            EXPECT_GT(run.steps.back().centre_distance, 0.8 * run.steps.front().centre_distance)
                << name_of(run.normalization.kind) << " seed " << seed;
        }
    }
}

// Paper 004 App. E: the residual (x + attention(x)) pulls the points back, so with 500 vs 50 points
// LNAS keeps two clusters at every step, as DNAS does; the centres move apart instead of together.
TEST(ModeCollapseToy, ResidualKeepsTwoClustersForEveryKind) {
    for (uint64_t seed = 1; seed <= 6; ++seed) {
        const auto result = run_mode_collapse(ModeCollapseOptions{.seed = seed, .residual = true});
        ASSERT_EQ(result.runs.size(), 2u);
        for (const auto& run : result.runs) {
            for (const auto& step : run.steps) expect_two_clusters(step, run.normalization.kind, seed);
            EXPECT_GT(run.steps.back().centre_distance, 2.0 * run.steps.front().centre_distance)
                << name_of(run.normalization.kind) << " seed " << seed;
        }
    }
}

TEST(ModeCollapseToy, RejectsBadOptions) {
    const auto expect_error = [](const ModeCollapseOptions& options, const std::string& mention) {
        try {
            run_mode_collapse(options);
            ADD_FAILURE() << "no error for bad " << mention;
        } catch (const hnas::Error& e) {
            EXPECT_NE(std::string(e.what()).find(mention), std::string::npos) << e.what();
        }
    };
    expect_error(ModeCollapseOptions{.n0 = 0}, "n0");
    expect_error(ModeCollapseOptions{.n1 = -3}, "n1");
    expect_error(ModeCollapseOptions{.steps = -1}, "steps");
    expect_error(ModeCollapseOptions{.spread = -0.1}, "spread");
    expect_error(ModeCollapseOptions{.score_scale = 0}, "score scale");
    expect_error(ModeCollapseOptions{.kinds = {}}, "kind");
    expect_error(ModeCollapseOptions{.hybrid_u = 1.5}, "hybrid u");
    EXPECT_THROW(hnas::parse_enum<ToyKind>("softmax", "kind"), hnas::Error);
}

TEST(CentreDistance, ClosedFormsAtHandComputedPoints) {
    // r = 1: q = 1, both reduce to 2(1 - s^2)a / (1 + s)^2 = 2(1 - s)a / (1 + s).
    const double a = 1.0, s = std::exp(-2.0);
    EXPECT_NEAR(lnas_centre_distance(a, 1.0), 2 * (1 - s) / (1 + s), 1e-15);
    EXPECT_NEAR(dnas_centre_distance(a, 1.0), 2 * (1 - s) / (1 + s), 1e-15);
    // r = 10: c0 = (r - s)/(r + s) a, c1 = (rs - 1)/(rs + 1) a for LNAS.
    EXPECT_NEAR(lnas_centre_distance(a, 10.0), (10 - s) / (10 + s) - (10 * s - 1) / (10 * s + 1), 1e-15);
    EXPECT_GT(dnas_centre_distance(a, 10.0) - lnas_centre_distance(a, 10.0), 0.1) << "Eq. 11 and 12 differ off r = 1";
}

// Paper 000 Sec. 5.2: both shrink the distance 2a, DNAS always bounds LNAS from above, and swapping the
// clusters (r -> 1/r) changes nothing.
TEST(CentreDistance, DnasUpperBoundsLnas) {
    for (const double a : {0.25, 0.5, 1.0, 1.5, 2.0}) {
        for (double log_r = -4; log_r <= 4; log_r += 0.25) {
            const double r = std::pow(10.0, log_r);
            const double lnas = lnas_centre_distance(a, r), dnas = dnas_centre_distance(a, r);
            EXPECT_GT(lnas, 0) << a << " " << r;
            EXPECT_GE(dnas, lnas * (1 - 1e-12)) << a << " " << r;
            EXPECT_LT(dnas, 2 * a) << a << " " << r;
            EXPECT_NEAR(lnas, lnas_centre_distance(a, 1 / r), 1e-12 * a);
            EXPECT_NEAR(dnas, dnas_centre_distance(a, 1 / r), 1e-12 * a);
        }
    }
}

TEST(CentreDistance, AnalyticMatchesOneDimensionalSimulation) {
    const auto result = centre_distance_analysis(CentreDistanceOptions{});
    ASSERT_EQ(result.curves.size(), 3u);
    size_t simulated = 0;
    for (const auto& curve : result.curves) {
        for (const auto& point : curve.simulated) {
            EXPECT_NEAR(point.lnas, lnas_centre_distance(curve.a, point.r), 1e-6) << curve.a << " " << point.r;
            EXPECT_NEAR(point.dnas, dnas_centre_distance(curve.a, point.r), 1e-6) << curve.a << " " << point.r;
            ++simulated;
        }
    }
    EXPECT_GE(simulated, 3u * 15u);
    EXPECT_LT(result.max_abs_error, 1e-6);
    // The simulation tells the normalizations apart: LNAS simulated against Eq. 12 would fail.
    EXPECT_GT(std::abs(simulate_centre_distance(1.0, 100, 10, {ToyKind::lnas}) - dnas_centre_distance(1.0, 10.0)), 0.1);
}

TEST(CentreDistance, RejectsBadOptions) {
    EXPECT_THROW(centre_distance_analysis(CentreDistanceOptions{.a_values = {0.0}}), hnas::Error);
    EXPECT_THROW(centre_distance_analysis(CentreDistanceOptions{.r_min = 2, .r_max = 1}), hnas::Error);
    EXPECT_THROW(centre_distance_analysis(CentreDistanceOptions{.r_min = 1e-6}), hnas::Error);  // too many points
    EXPECT_THROW(simulate_centre_distance(1.0, 0, 5, {ToyKind::lnas}), hnas::Error);
}

}  // namespace
