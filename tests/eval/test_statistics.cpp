// The statistics of experiments (src/eval/statistics.h): hand-worked cases, and an independent Python
// computation with the same random draws (tests/fixtures/make_statistics_fixture.py, tests/fixtures/statistics.json).
#include <cmath>

#include "base/json.h"
#include "eval/statistics.h"
#include "test_support.h"

namespace hnas::eval {
namespace {

std::vector<double> doubles(const Json& values) { return values.get<std::vector<double>>(); }

void expect_test(const PairedTest& got, const Json& expected, const std::string& label) {
    EXPECT_EQ(got.pairs, expected.at("pairs").get<int64_t>()) << label;
    EXPECT_NEAR(got.mean_difference, expected.at("mean_difference").get<double>(), 1e-12) << label;
    EXPECT_NEAR(got.effect_size, expected.at("effect_size").get<double>(), 1e-10) << label;
    EXPECT_EQ(got.resamples, expected.at("resamples").get<int64_t>()) << label;
    // The same draws in the same order: the counts, so the p-values, agree exactly.
    EXPECT_DOUBLE_EQ(got.p_value, expected.at("p_value").get<double>()) << label;
}

TEST(Statistics, SummaryByHand) {
    const Summary s = summarize({1, 2, 3, 4});
    EXPECT_EQ(s.n, 4);
    EXPECT_DOUBLE_EQ(s.mean, 2.5);
    EXPECT_NEAR(s.standard_error, std::sqrt(5.0 / 3.0) / 2.0, 1e-15);  // sample sd √(5/3) over √4
    EXPECT_EQ(s.min, 1);
    EXPECT_EQ(s.max, 4);
    EXPECT_EQ(summarize({7}).standard_error, 0.0);
    EXPECT_EQ(summarize({7}).ci95, 0.0);
    EXPECT_NEAR(s.ci95, 3.1824 * s.standard_error, 1e-12);  // t(0.975, 3)
    EXPECT_CONTAINS(testing::error_of([] { summarize({}); }), "no values");
}

// The one mean of the codebase (summaries, paired tests, the report's per-layer u): in order, and NaN
// for nothing rather than a division by zero or a made-up 0.
TEST(Statistics, MeanOf) {
    EXPECT_DOUBLE_EQ(mean_of({1, 2, 3, 4}), 2.5);
    EXPECT_EQ(mean_of({-7}), -7.0);
    EXPECT_TRUE(std::isnan(mean_of({})));
}

// scipy.stats.t.ppf(0.975, ν): the table's ends and the expansion beyond it.
TEST(Statistics, StudentTQuantiles) {
    EXPECT_EQ(eval::student_t_975(1), 12.7062);
    EXPECT_EQ(eval::student_t_975(4), 2.7764);
    EXPECT_EQ(eval::student_t_975(30), 2.0423);
    EXPECT_NEAR(eval::student_t_975(31), 2.039513, 2e-4);
    EXPECT_NEAR(eval::student_t_975(60), 2.000298, 1e-4);
    EXPECT_NEAR(eval::student_t_975(1000), 1.962339, 1e-5);
    EXPECT_CONTAINS(testing::error_of([] { eval::student_t_975(0); }), "0 degrees of freedom");
}

TEST(Statistics, ExactPermutationTestByHand) {
    // Differences 1, 2, 3: of the 8 sign patterns only +6 and −6 reach |6|.
    const PairedTest t = paired_permutation_test({2, 4, 6}, {1, 2, 3});
    EXPECT_EQ(t.resamples, 8);
    EXPECT_DOUBLE_EQ(t.p_value, 0.25);
    EXPECT_DOUBLE_EQ(t.mean_difference, 2.0);
    EXPECT_DOUBLE_EQ(t.effect_size, 2.0);  // mean 2 over sd 1
    // Five equal differences: only the all-plus and all-minus patterns, 2 of 32.
    EXPECT_DOUBLE_EQ(paired_permutation_test({1, 1, 1, 1, 1}, {0, 0, 0, 0, 0}).p_value, 2.0 / 32.0);
    // No difference at all: every pattern reaches it.
    EXPECT_DOUBLE_EQ(paired_permutation_test({3, 1}, {3, 1}).p_value, 1.0);
    EXPECT_CONTAINS(testing::error_of([] { paired_permutation_test({1, 2}, {1}); }), "2 values against 1");
}

// Stratified by seed, each seed's examples are resampled apart and each seed's mean weighs the same.
TEST(Statistics, StratifiedBootstrapResamplesWithinEachSeed) {
    // One stratum is the plain bootstrap, draw for draw.
    const std::vector<double> a = {3, 1, 4, 1, 5, 9, 2, 6}, b = {2, 7, 1, 8, 2, 8, 1, 8};
    const PairedTest plain = paired_bootstrap_test(a, b, 500, 3);
    const PairedTest one = stratified_paired_bootstrap_test({a}, {b}, 500, 3);
    EXPECT_EQ(one.p_value, plain.p_value);
    EXPECT_EQ(one.mean_difference, plain.mean_difference);
    EXPECT_EQ(one.effect_size, plain.effect_size);
    EXPECT_EQ(one.pairs, 8);
    // Seed 1's differences {1, 1}, seed 2's {−3}: the mean over seeds is −1 (pooled it would be −1/3), and
    // no resample can move either seed's mean, so none crosses 0.
    const PairedTest fixed = stratified_paired_bootstrap_test({{2, 2}, {0}}, {{1, 1}, {3}}, 1000, 1);
    EXPECT_DOUBLE_EQ(fixed.mean_difference, -1.0);
    EXPECT_EQ(fixed.pairs, 3);
    EXPECT_EQ(fixed.p_value, 0.0);
    // Seed 1's {3, −1} resamples to a mean of 3, 1 or −1 (¼, ½, ¼), seed 2's {1} stays 1: the mean over
    // seeds, observed 1, reaches 0 only with seed 1 at −1, so p = 2 · ¼. The three differences pooled
    // would reach a sum of 0 in 4 of 27 resamples (p 0.30).
    const PairedTest split = stratified_paired_bootstrap_test({{3, -1}, {1}}, {{0, 0}, {0}}, 40000, 5);
    EXPECT_DOUBLE_EQ(split.mean_difference, 1.0);
    EXPECT_NEAR(split.p_value, 0.5, 0.02);
    EXPECT_CONTAINS(testing::error_of([] { stratified_paired_bootstrap_test({{1}}, {{1}, {2}}); }), "1 strata against 2");
    EXPECT_CONTAINS(testing::error_of([] { stratified_paired_bootstrap_test({{1, 2}}, {{1}}); }), "2 values against 1");
}

// Holm's step-down adjustment by hand: sorted 0.005, 0.01, 0.03, 0.04 times 4, 3, 2, 1 give 0.02, 0.03,
// 0.06, 0.04; the last is raised to 0.06 (an adjusted p never falls below a smaller raw p's), and each
// goes back to its input place.
TEST(Statistics, HolmAdjustmentByHand) {
    const std::vector<double> adjusted = holm_adjusted({0.01, 0.04, 0.03, 0.005});
    ASSERT_EQ(adjusted.size(), 4u);
    const std::vector<double> expected{0.03, 0.06, 0.06, 0.02};
    for (size_t i = 0; i < expected.size(); ++i) EXPECT_NEAR(adjusted[i], expected[i], 1e-15) << i;
    // Without the running maximum 0.021 would stay 0.021, below 0.02's adjusted 0.04.
    const std::vector<double> raised = holm_adjusted({0.001, 0.02, 0.021});
    EXPECT_NEAR(raised[0], 0.003, 1e-15);
    EXPECT_NEAR(raised[1], 0.04, 1e-15);
    EXPECT_NEAR(raised[2], 0.04, 1e-15);
    // Ties get one value whichever comes first.
    for (const std::vector<double>& tied : {std::vector<double>{0.02, 0.02, 0.5}, std::vector<double>{0.5, 0.02, 0.02}}) {
        const std::vector<double> out = holm_adjusted(tied);
        for (size_t i = 0; i < tied.size(); ++i) EXPECT_NEAR(out[i], tied[i] == 0.5 ? 0.5 : 0.06, 1e-15) << i;
    }
}

TEST(Statistics, HolmAdjustmentEdges) {
    EXPECT_TRUE(holm_adjusted({}).empty());
    EXPECT_EQ(holm_adjusted({0.2}), std::vector<double>{0.2});  // a family of one is not adjusted
    EXPECT_EQ(holm_adjusted({0.4, 0.5, 0.6}), (std::vector<double>{1.0, 1.0, 1.0}));  // 1.2 and 1.0 capped at 1
    EXPECT_EQ(holm_adjusted({0.0, 1.0}), (std::vector<double>{0.0, 1.0}));
    EXPECT_CONTAINS(testing::error_of([] { holm_adjusted({0.1, 1.5}); }), "a p-value must be in [0, 1], got 1.5");
    EXPECT_CONTAINS(testing::error_of([] { holm_adjusted({std::nan("")}); }), "got nan");
}

TEST(Statistics, AgreesWithThePythonReference) {
    const Json& cases = testing::load_fixture("statistics.json");
    const Json& summary = cases.at("summary");
    const Summary s = summarize(doubles(summary.at("values")));
    const Json& expected = summary.at("expected");
    EXPECT_EQ(s.n, expected.at("n").get<int64_t>());
    EXPECT_NEAR(s.mean, expected.at("mean").get<double>(), 1e-12);
    EXPECT_NEAR(s.standard_error, expected.at("standard_error").get<double>(), 1e-12);
    EXPECT_EQ(s.min, expected.at("min").get<double>());
    EXPECT_EQ(s.max, expected.at("max").get<double>());
    for (const char* name : {"permutation_exact", "permutation_sampled"}) {
        const Json& c = cases.at(name);
        expect_test(paired_permutation_test(doubles(c.at("a")), doubles(c.at("b")), c.at("samples").get<int64_t>(),
                                            c.at("seed").get<uint64_t>()),
                    c.at("expected"), name);
    }
    const Json& c = cases.at("bootstrap");
    expect_test(paired_bootstrap_test(doubles(c.at("a")), doubles(c.at("b")), c.at("samples").get<int64_t>(),
                                      c.at("seed").get<uint64_t>()),
                c.at("expected"), "bootstrap");
}

}  // namespace
}  // namespace hnas::eval
