// The statistics of experiments: a metric summarized over seeds, and paired tests between two settings
// (docs/experiments/README.md). The papers report mean ± standard error over 5 runs (paper 004, Table 3); a difference
// between two settings that share seeds and a test set is tested on the pairs, not on two means.
#pragma once

#include <cstdint>
#include <vector>

namespace hnas::eval {

struct Summary {
    int64_t n = 0;
    double mean = 0.0;
    double standard_error = 0.0;  // sample standard deviation (n − 1) / √n; 0 for one value
    // Half the width of the mean's 95 % confidence interval, t(0.975, n − 1) · standard_error (paper 003
    // Table 1 gives its accuracies ± this); 0 for one value.
    double ci95 = 0.0;
    double min = 0.0, max = 0.0;
};
// The arithmetic mean, summed in order; NaN for an empty list (a mean of nothing is no number).
double mean_of(const std::vector<double>& values);

// Throws for an empty list.
Summary summarize(const std::vector<double>& values);
// The 0.975 quantile of Student's t distribution with `degrees` of freedom (≥ 1): exact to 4 decimals
// from the table up to 30, Cornish–Fisher's expansion beyond.
double student_t_975(int64_t degrees);

struct PairedTest {
    int64_t pairs = 0;
    double mean_difference = 0.0;  // mean of a_i − b_i
    double effect_size = 0.0;      // Cohen's d_z: the mean difference over the differences' standard deviation (0 when that is 0)
    double p_value = 1.0;          // two-sided
    int64_t resamples = 0;         // the sign patterns or bootstrap samples it counted
};

// The paired permutation (sign-flip) test: under the null each difference a_i − b_i is as likely
// negated; p is the share of sign patterns whose |mean| reaches the observed one. Exact over all 2^n
// patterns for n ≤ kExactPermutationPairs, else over `samples` random patterns drawn with `seed`.
inline constexpr int64_t kExactPermutationPairs = 20;
PairedTest paired_permutation_test(const std::vector<double>& a, const std::vector<double>& b, int64_t samples = 100000,
                                   uint64_t seed = 1);

// The paired bootstrap over test examples (Koehn 2004): `samples` resamples of the example indices with
// replacement, drawn with `seed`; p is twice the share of resamples whose mean difference falls on the
// other side of 0 from the observed one (0 included), at most 1.
PairedTest paired_bootstrap_test(const std::vector<double>& a, const std::vector<double>& b, int64_t samples = 1000,
                                 uint64_t seed = 1);

// The same bootstrap stratified by seed, for runs whose seeds scored different test examples (masked-LM
// masks other tokens under each seed, the same ones in every setting): a[s][i] and b[s][i] are paired,
// each resample draws every stratum's examples from that stratum alone, and the statistic is the mean over
// strata of each stratum's mean difference, as a metric averaged over seeds is. d_z is over the pooled
// differences. One stratum is paired_bootstrap_test, draw for draw.
PairedTest stratified_paired_bootstrap_test(const std::vector<std::vector<double>>& a,
                                            const std::vector<std::vector<double>>& b, int64_t samples = 1000,
                                            uint64_t seed = 1);

// Holm's step-down adjustment (Holm 1979) of a family of m p-values, each in [0, 1], in their input
// order: with p sorted ascending, p_(i) becomes max over j ≤ i of min(1, (m − j + 1) · p_(j)). Rejecting
// where the adjusted p is below α keeps the chance of any false rejection in the family below α, with
// no assumption on how the tests depend on each other (pairs of settings share runs).
std::vector<double> holm_adjusted(const std::vector<double>& p_values);

}  // namespace hnas::eval
