#include "eval/glue_metrics.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <numeric>

#include "base/check.h"

namespace hnas::eval {

namespace {

template <typename T>
void check_pairs(const std::vector<T>& a, const std::vector<T>& b, const char* metric) {
    HNAS_CHECK(a.size() == b.size(), metric, ": ", a.size(), " predictions for ", b.size(), " gold values");
    HNAS_CHECK(!a.empty(), metric, ": no examples");
}

}  // namespace

double accuracy(const std::vector<int32_t>& predicted, const std::vector<int32_t>& gold) {
    check_pairs(predicted, gold, "accuracy");
    int64_t right = 0;
    for (size_t i = 0; i < gold.size(); ++i) right += predicted[i] == gold[i];
    return static_cast<double>(right) / static_cast<double>(gold.size());
}

double binary_f1(const std::vector<int32_t>& predicted, const std::vector<int32_t>& gold) {
    check_pairs(predicted, gold, "f1");
    int64_t true_positive = 0, predicted_positive = 0, gold_positive = 0;
    for (size_t i = 0; i < gold.size(); ++i) {
        true_positive += predicted[i] == 1 && gold[i] == 1;
        predicted_positive += predicted[i] == 1;
        gold_positive += gold[i] == 1;
    }
    // F1 = 2 TP / (2 TP + FP + FN) = 2 TP / (predicted positives + gold positives)
    const int64_t denominator = predicted_positive + gold_positive;
    return denominator == 0 ? 0.0 : 2.0 * static_cast<double>(true_positive) / static_cast<double>(denominator);
}

double matthews_correlation(const std::vector<int32_t>& predicted, const std::vector<int32_t>& gold) {
    check_pairs(predicted, gold, "mcc");
    // Gorodkin's multi-class form over the confusion matrix C: (c·s − Σ_k p_k t_k) /
    // sqrt((s² − Σ p_k²)(s² − Σ t_k²)), c correct, s samples, p_k predicted and t_k true counts of k.
    std::map<int32_t, double> predicted_count, gold_count;
    double correct = 0.0;
    for (size_t i = 0; i < gold.size(); ++i) {
        predicted_count[predicted[i]] += 1.0;
        gold_count[gold[i]] += 1.0;
        correct += predicted[i] == gold[i];
    }
    const double samples = static_cast<double>(gold.size());
    double cross = 0.0, predicted_squares = 0.0, gold_squares = 0.0;
    for (const auto& [label, count] : predicted_count) {
        predicted_squares += count * count;
        const auto found = gold_count.find(label);
        if (found != gold_count.end()) cross += count * found->second;
    }
    for (const auto& [label, count] : gold_count) gold_squares += count * count;
    const double denominator = std::sqrt((samples * samples - predicted_squares) * (samples * samples - gold_squares));
    return denominator == 0.0 ? 0.0 : (correct * samples - cross) / denominator;
}

double pearson(const std::vector<double>& x, const std::vector<double>& y) {
    check_pairs(x, y, "pearson");
    const double n = static_cast<double>(x.size());
    const double mean_x = std::accumulate(x.begin(), x.end(), 0.0) / n, mean_y = std::accumulate(y.begin(), y.end(), 0.0) / n;
    double xy = 0.0, xx = 0.0, yy = 0.0;
    for (size_t i = 0; i < x.size(); ++i) {
        xy += (x[i] - mean_x) * (y[i] - mean_y);
        xx += (x[i] - mean_x) * (x[i] - mean_x);
        yy += (y[i] - mean_y) * (y[i] - mean_y);
    }
    if (xx == 0.0 || yy == 0.0) return std::numeric_limits<double>::quiet_NaN();
    return xy / std::sqrt(xx * yy);
}

std::vector<double> average_ranks(const std::vector<double>& values) {
    std::vector<size_t> order(values.size());
    std::iota(order.begin(), order.end(), 0);
    std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) { return values[a] < values[b]; });
    std::vector<double> ranks(values.size());
    for (size_t start = 0; start < order.size();) {
        size_t end = start + 1;
        while (end < order.size() && values[order[end]] == values[order[start]]) ++end;
        const double rank = (static_cast<double>(start + 1) + static_cast<double>(end)) / 2.0;  // mean of start+1 .. end
        for (size_t i = start; i < end; ++i) ranks[order[i]] = rank;
        start = end;
    }
    return ranks;
}

double spearman(const std::vector<double>& x, const std::vector<double>& y) {
    check_pairs(x, y, "spearman");
    return pearson(average_ranks(x), average_ranks(y));
}

}  // namespace hnas::eval
