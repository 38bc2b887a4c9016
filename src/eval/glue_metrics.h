// The metrics GLUE reports, as scikit-learn and SciPy define them: accuracy, F1 of the positive class
// (binary tasks: class 1), Matthews correlation (multi-class, sklearn's matthews_corrcoef), Pearson and
// Spearman correlation (Spearman with average ranks for ties, scipy.stats.spearmanr). A degenerate
// input follows those libraries: MCC is 0 when its denominator is 0, F1 is 0 when there is no
// positive prediction or gold label (sklearn's zero_division=0), and a correlation with a constant
// vector is NaN.
#pragma once

#include <cstdint>
#include <vector>

namespace hnas::eval {

double accuracy(const std::vector<int32_t>& predicted, const std::vector<int32_t>& gold);
double binary_f1(const std::vector<int32_t>& predicted, const std::vector<int32_t>& gold);
double matthews_correlation(const std::vector<int32_t>& predicted, const std::vector<int32_t>& gold);
double pearson(const std::vector<double>& x, const std::vector<double>& y);
double spearman(const std::vector<double>& x, const std::vector<double>& y);

// 1-based ranks, ties sharing the average of their ranks.
std::vector<double> average_ranks(const std::vector<double>& values);

}  // namespace hnas::eval
