// Paper 002's synthetic tasks: the label rules on hand-made sequences, the case shares the paper
// states for S = 100 and N = 128, and batches reproducible from (seed, index) alone.
#include <cmath>

#include "data/synthetic.h"
#include "test_support.h"

namespace hnas {
namespace {

using data::DistinctionCase;

TEST(SyntheticLabels, CaseDistinctionFollowsFigure2) {
    // Fig. 2's two examples: 64 occurs, so the minimum's position; else 50 occurs, so position 0.
    EXPECT_EQ(data::case_distinction_label(std::vector<int32_t>{97, 42, 64, 33}).position, 3);
    EXPECT_EQ(data::case_distinction_label(std::vector<int32_t>{97, 42, 64, 33}).rule, DistinctionCase::argmin);
    EXPECT_EQ(data::case_distinction_label(std::vector<int32_t>{52, 50, 67, 33}).position, 0);
    EXPECT_EQ(data::case_distinction_label(std::vector<int32_t>{52, 50, 67, 33}).rule, DistinctionCase::first);
    // Neither marker: the maximum's position.
    EXPECT_EQ(data::case_distinction_label(std::vector<int32_t>{5, 99, 12, 7}).position, 1);
    EXPECT_EQ(data::case_distinction_label(std::vector<int32_t>{5, 99, 12, 7}).rule, DistinctionCase::argmax);
    // Ties go to the first extremum, as numpy's argmin and argmax (the authors' generator) do.
    EXPECT_EQ(data::case_distinction_label(std::vector<int32_t>{64, 3, 9, 3}).position, 1);
    EXPECT_EQ(data::case_distinction_label(std::vector<int32_t>{8, 99, 1, 99}).position, 1);
    // 64 takes precedence over 50, wherever each stands.
    EXPECT_EQ(data::case_distinction_label(std::vector<int32_t>{50, 70, 64, 65}).position, 0);
    EXPECT_EQ(data::case_distinction_label(std::vector<int32_t>{50, 70, 64, 65}).rule, DistinctionCase::argmin);
    EXPECT_EQ(data::case_distinction_label(std::vector<int32_t>{70, 64, 50, 65}).position, 2);
}

TEST(SyntheticLabels, ModeIsTheMostFrequentSymbolSmallestOnTies) {
    EXPECT_EQ(data::mode_label(std::vector<int32_t>{3, 3, 0}, 10), 3);
    EXPECT_EQ(data::mode_label(std::vector<int32_t>{2, 1, 2, 1}, 10), 1);
    EXPECT_EQ(data::mode_label(std::vector<int32_t>{9, 8, 7}, 10), 7);
    EXPECT_CONTAINS(testing::error_of([] { data::mode_label(std::vector<int32_t>{3, 10}, 10); }),
                    "mode finding: symbol 10 is outside 0 … 9");
}

// p_argmin = 1 − 0.99^128 = 72.37 %, p_first = 0.99^128 − 0.98^128 = 20.11 %, p_argmax = 0.98^128 =
// 7.53 % (paper 002 §5.1: 72.4 / 20.1 / 7.5 %); each share within 4 standard errors of 64,000 draws.
TEST(SyntheticData, CaseSharesAreThePapers) {
    data::SyntheticOptions options;
    const int batches = 2000;
    int64_t counts[3] = {0, 0, 0};
    for (int k = 0; k < batches; ++k) {
        for (const DistinctionCase rule : data::synthetic_batch(options, static_cast<uint64_t>(k)).rules) ++counts[static_cast<int>(rule)];
    }
    const double n = static_cast<double>(batches * options.batch);
    const double expected[3] = {1.0 - std::pow(0.99, 128), std::pow(0.99, 128) - std::pow(0.98, 128), std::pow(0.98, 128)};
    for (int c = 0; c < 3; ++c) {
        const double share = static_cast<double>(counts[c]) / n;
        const double standard_error = std::sqrt(expected[c] * (1.0 - expected[c]) / n);
        EXPECT_NEAR(share, expected[c], 4.0 * standard_error) << name_of(static_cast<DistinctionCase>(c));
    }
    EXPECT_NEAR(expected[0], 0.724, 5e-4);
    EXPECT_NEAR(expected[1], 0.201, 5e-4);
    EXPECT_NEAR(expected[2], 0.075, 5e-4);
}

TEST(SyntheticData, BatchesAreReproducibleFromSeedAndIndexAlone) {
    for (const data::SyntheticProblem problem : {data::SyntheticProblem::case_distinction, data::SyntheticProblem::mode}) {
        data::SyntheticOptions options;
        options.problem = problem;
        options.symbols = problem == data::SyntheticProblem::mode ? 10 : 100;
        options.seed = 5;
        const data::SyntheticBatch third = data::synthetic_batch(options, 3);
        EXPECT_EQ(third.symbols, data::synthetic_batch(options, 3).symbols);
        EXPECT_EQ(third.labels, data::synthetic_batch(options, 3).labels);
        EXPECT_NE(third.symbols, data::synthetic_batch(options, 4).symbols);
        options.seed = 6;
        EXPECT_NE(third.symbols, data::synthetic_batch(options, 3).symbols);
        ASSERT_EQ(third.symbols.size(), static_cast<size_t>(options.batch * options.length));
        for (const int32_t symbol : third.symbols) {
            EXPECT_GE(symbol, 0);
            EXPECT_LT(symbol, options.symbols);
        }
        // Every label is the rule's label of its own row.
        for (int64_t row = 0; row < third.rows; ++row) {
            const std::span<const int32_t> sequence(third.symbols.data() + row * third.length, static_cast<size_t>(third.length));
            const int32_t expected = problem == data::SyntheticProblem::mode ? data::mode_label(sequence, options.symbols)
                                                                             : data::case_distinction_label(sequence).position;
            EXPECT_EQ(third.labels[static_cast<size_t>(row)], expected);
        }
    }
}

TEST(SyntheticData, CaseDistinctionNeedsItsMarkersInTheAlphabet) {
    data::SyntheticOptions options;
    options.symbols = 64;
    EXPECT_CONTAINS(testing::error_of([&] { data::synthetic_batch(options, 0); }),
                    "case distinction needs more than 64 symbols (its markers are 50 and 64), got 64");
}

}  // namespace
}  // namespace hnas
