#include "eval/statistics.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>

#include "base/check.h"
#include "base/rng.h"

namespace hnas::eval {

namespace {

// Sample standard deviation (n − 1); 0 for one value.
double standard_deviation(const std::vector<double>& values, double mean) {
    if (values.size() < 2) return 0.0;
    double squares = 0.0;
    for (const double value : values) squares += (value - mean) * (value - mean);
    return std::sqrt(squares / static_cast<double>(values.size() - 1));
}

// The differences a_i − b_i, with the pair count checked; and the test's mean difference and d_z.
std::vector<double> differences(const std::vector<double>& a, const std::vector<double>& b, const char* test,
                                PairedTest& result) {
    HNAS_CHECK(a.size() == b.size(), test, ": ", a.size(), " values against ", b.size(), "; a paired test needs pairs");
    HNAS_CHECK(!a.empty(), test, ": no pairs");
    std::vector<double> d(a.size());
    for (size_t i = 0; i < a.size(); ++i) d[i] = a[i] - b[i];
    result.pairs = static_cast<int64_t>(d.size());
    result.mean_difference = mean_of(d);
    const double sd = standard_deviation(d, result.mean_difference);
    result.effect_size = sd > 0.0 ? result.mean_difference / sd : 0.0;
    return d;
}

// Sums equal up to rounding count as reaching the observed one.
constexpr double kTies = 1e-12;

}  // namespace

double mean_of(const std::vector<double>& values) {
    if (values.empty()) return std::numeric_limits<double>::quiet_NaN();
    return std::accumulate(values.begin(), values.end(), 0.0) / static_cast<double>(values.size());
}

double student_t_975(int64_t degrees) {
    HNAS_CHECK(degrees >= 1, "student_t_975: ", degrees, " degrees of freedom");
    // t(0.975, ν) for ν = 1 … 30 (any statistics table; scipy.stats.t.ppf(0.975, ν) to 4 decimals)
    static constexpr double kTable[] = {12.7062, 4.3027, 3.1824, 2.7764, 2.5706, 2.4469, 2.3646, 2.3060, 2.2622, 2.2281,
                                        2.2010,  2.1788, 2.1604, 2.1448, 2.1314, 2.1199, 2.1098, 2.1009, 2.0930, 2.0860,
                                        2.0796,  2.0739, 2.0687, 2.0639, 2.0595, 2.0555, 2.0518, 2.0484, 2.0452, 2.0423};
    if (degrees <= 30) return kTable[degrees - 1];
    const double z = 1.959963984540054, v = static_cast<double>(degrees);
    return z + (z * z * z + z) / (4 * v) + (5 * std::pow(z, 5) + 16 * z * z * z + 3 * z) / (96 * v * v);
}

Summary summarize(const std::vector<double>& values) {
    HNAS_CHECK(!values.empty(), "summarize: no values");
    Summary s;
    s.n = static_cast<int64_t>(values.size());
    s.mean = mean_of(values);
    s.standard_error = standard_deviation(values, s.mean) / std::sqrt(static_cast<double>(values.size()));
    s.ci95 = s.n > 1 ? student_t_975(s.n - 1) * s.standard_error : 0.0;
    s.min = *std::min_element(values.begin(), values.end());
    s.max = *std::max_element(values.begin(), values.end());
    return s;
}

PairedTest paired_permutation_test(const std::vector<double>& a, const std::vector<double>& b, int64_t samples,
                                   uint64_t seed) {
    PairedTest result;
    const std::vector<double> d = differences(a, b, "paired permutation test", result);
    const double observed = std::fabs(std::accumulate(d.begin(), d.end(), 0.0));
    const double reach = observed * (1.0 - kTies) - kTies;
    const auto n = static_cast<int64_t>(d.size());
    int64_t as_extreme = 0;
    if (n <= kExactPermutationPairs) {
        result.resamples = int64_t{1} << n;
        for (int64_t signs = 0; signs < result.resamples; ++signs) {
            double sum = 0.0;
            for (int64_t i = 0; i < n; ++i) sum += (signs >> i & 1) ? -d[static_cast<size_t>(i)] : d[static_cast<size_t>(i)];
            as_extreme += std::fabs(sum) >= reach;
        }
    } else {
        HNAS_CHECK(samples > 0, "paired permutation test: samples must be positive, got ", samples);
        Rng rng(seed, 0);
        result.resamples = samples;
        for (int64_t k = 0; k < samples; ++k) {
            double sum = 0.0;
            for (const double value : d) sum += rng.below(2) ? -value : value;
            as_extreme += std::fabs(sum) >= reach;
        }
    }
    result.p_value = static_cast<double>(as_extreme) / static_cast<double>(result.resamples);
    return result;
}

PairedTest paired_bootstrap_test(const std::vector<double>& a, const std::vector<double>& b, int64_t samples,
                                 uint64_t seed) {
    return stratified_paired_bootstrap_test({a}, {b}, samples, seed);
}

PairedTest stratified_paired_bootstrap_test(const std::vector<std::vector<double>>& a,
                                            const std::vector<std::vector<double>>& b, int64_t samples, uint64_t seed) {
    HNAS_CHECK(a.size() == b.size() && !a.empty(), "paired bootstrap test: ", a.size(), " strata against ", b.size(),
               "; a paired test needs the same strata, at least one");
    HNAS_CHECK(samples > 0, "paired bootstrap test: samples must be positive, got ", samples);
    PairedTest result;
    std::vector<std::vector<double>> strata;
    std::vector<double> pooled;
    for (size_t s = 0; s < a.size(); ++s) {
        PairedTest stratum;
        strata.push_back(differences(a[s], b[s], "paired bootstrap test", stratum));
        result.mean_difference += stratum.mean_difference / static_cast<double>(a.size());
        pooled.insert(pooled.end(), strata.back().begin(), strata.back().end());
    }
    result.pairs = static_cast<int64_t>(pooled.size());
    const double sd = standard_deviation(pooled, result.mean_difference);
    result.effect_size = sd > 0.0 ? result.mean_difference / sd : 0.0;
    Rng rng(seed, 0);
    int64_t other_side = 0;
    for (int64_t k = 0; k < samples; ++k) {
        double mean = 0.0;
        for (const std::vector<double>& d : strata) {
            double sum = 0.0;
            for (size_t i = 0; i < d.size(); ++i) sum += d[rng.below(d.size())];
            mean += sum / static_cast<double>(d.size());
        }
        other_side += result.mean_difference > 0.0 ? mean <= 0.0 : result.mean_difference < 0.0 ? mean >= 0.0 : 1;
    }
    result.resamples = samples;
    result.p_value = std::min(1.0, 2.0 * static_cast<double>(other_side) / static_cast<double>(samples));
    return result;
}

std::vector<double> holm_adjusted(const std::vector<double>& p_values) {
    for (const double p : p_values) HNAS_CHECK(p >= 0.0 && p <= 1.0, "holm_adjusted: a p-value must be in [0, 1], got ", p);
    std::vector<size_t> order(p_values.size());
    std::iota(order.begin(), order.end(), size_t{0});
    // Tied p-values come out equal in any order: the running maximum carries the first one's over the others.
    std::sort(order.begin(), order.end(), [&](size_t i, size_t j) { return p_values[i] < p_values[j]; });
    std::vector<double> adjusted(p_values.size());
    double running = 0.0;
    for (size_t rank = 0; rank < order.size(); ++rank) {
        const double factor = static_cast<double>(order.size() - rank);
        running = std::max(running, std::min(1.0, factor * p_values[order[rank]]));
        adjusted[order[rank]] = running;
    }
    return adjusted;
}

}  // namespace hnas::eval
