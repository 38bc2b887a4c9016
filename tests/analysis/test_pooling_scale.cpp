// Paper 002 Fig. 1's output scale (analysis/pooling_scale.h): the poolings' exact relations, every
// kind at N = 1, the slope fit, and bad options named.
#include <cmath>
#include <map>

#include "analysis/pooling_scale.h"
#include "nn/attention_norm.h"
#include "test_support.h"

namespace hnas {
namespace {

using analysis::PoolingScaleRow;

std::map<std::string, PoolingScaleRow> at_length(const std::vector<PoolingScaleRow>& rows, int64_t length) {
    std::map<std::string, PoolingScaleRow> found;
    for (const PoolingScaleRow& row : rows) {
        if (row.length == length) found[row.aggregator] = row;
    }
    return found;
}

TEST(PoolingScale, PoolingsAndKindsRelateAsDefined) {
    const std::vector<PoolingScaleRow> rows = analysis::run_pooling_scale({.lengths = {1, 4}, .vectors = 64, .width = 8, .seed = 3});
    const auto one = at_length(rows, 1), four = at_length(rows, 4);
    // Every registry kind but those that compare templates, after the four poolings.
    size_t kinds = 0;
    for (const nn::AttentionKind* kind : nn::attention_kinds()) kinds += kind->compares_templates ? 0 : 1;
    EXPECT_EQ(rows.size(), 2 * (4 + kinds));
    // At N = 1 a distribution over one key is that key: every kind whose rows sum to one returns the values,
    // as mean, sum and max do.
    for (const nn::AttentionKind* kind : nn::attention_kinds()) {
        if (!kind->rows_sum_to_one || kind->compares_templates) continue;
        EXPECT_NEAR(one.at(kind->name).output_std, one.at("mean").output_std, 1e-6) << kind->name;
        EXPECT_NEAR(one.at(kind->name).mean_norm, one.at("mean").mean_norm, 1e-5) << kind->name;
    }
    EXPECT_DOUBLE_EQ(one.at("sum").output_std, one.at("max").output_std);
    // The sum is N times the mean; the normalized sum has unit standard deviation per vector, so overall.
    EXPECT_NEAR(four.at("sum").output_std, 4.0 * four.at("mean").output_std, 1e-5);
    EXPECT_NEAR(four.at("sum").mean_norm, 4.0 * four.at("mean").mean_norm, 1e-4);
    EXPECT_NEAR(four.at("normalized_sum").output_std, 1.0, 1e-6);
    EXPECT_NEAR(four.at("normalized_sum").mean_norm, std::sqrt(8.0), 1e-5);
}

TEST(PoolingScale, SlopesAreTheLogLogFitFromTheFirstLength) {
    std::vector<PoolingScaleRow> rows;
    for (const int64_t n : {4, 16, 64, 256}) {
        rows.push_back({"up", n, std::sqrt(static_cast<double>(n)), 1.0});
        rows.push_back({"flat", n, n == 4 ? 100.0 : 2.0, 1.0});  // N = 4 lies below the fit's range
    }
    const Json slopes = analysis::pooling_scale_slopes(rows, 16);
    EXPECT_NEAR(slopes.at("up").get<double>(), 0.5, 1e-12);
    EXPECT_NEAR(slopes.at("flat").get<double>(), 0.0, 1e-12);
    EXPECT_EQ(slopes.begin().key(), "up");
}

TEST(PoolingScale, BadOptionsAreNamed) {
    EXPECT_CONTAINS(testing::error_of([] { analysis::run_pooling_scale({.lengths = {3}, .vectors = 64}); }),
                    "pooling scale: length 3 must be positive and divide 64 vectors");
    EXPECT_CONTAINS(testing::error_of([] { analysis::run_pooling_scale({.lengths = {1}, .width = 0}); }),
                    "pooling scale: width 0 and vectors 16384 must be positive");
}

}  // namespace
}  // namespace hnas
