// `hnas compare`: the results of a sweep's trials, or of runs given one by one, grouped by
// setting. Per setting, every metric's mean ± standard error, min and max over seeds (the papers'
// tables: paper 004 Table 3 gives mean ± s.e. over 5 runs). Between two settings, per metric, on the
// seeds they share: the mean difference and its effect size, the paired permutation test over seeds,
// and for a metric measured per test example (ROUGE) the paired bootstrap over test examples (Koehn
// 2004) on each example's score averaged over those seeds. Each test's p also comes Holm-adjusted
// ("p_holm") within its family: every permutation test of the comparison (all pairs, all metrics) is
// one family, every bootstrap test another; "families" gives their sizes.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "base/json.h"

namespace hnas::experiments {

struct TrialResult {
    std::string setting;
    int64_t seed = 0;
    std::string run;  // its run directory
    Json result;      // its result.json (run_result.h)
};

// The results of each path: a run directory holding a result.json (its setting is the name of its
// folder, or of the folder above a folder named seed-<k>), a sweep's folder (sweep.json: its trials in
// order, those without a result left out), or any folder below which such run directories lie.
std::vector<TrialResult> collect_results(const std::vector<std::string>& paths);

struct Comparison {
    Json json;
    std::string markdown;
};

// A test named before its runs as one a finding rests on (`hnas compare --family FILE`): settings a and b
// (in either order), one metric. Given a family, Holm's adjustment runs over its tests alone, each kind of
// test apart, and every other test's "p_holm" is null: it is descriptive.
struct FamilyTest {
    std::string a, b, metric;
};
// FILE: a JSON array of {"a": SETTING, "b": SETTING, "metric": NAME}.
std::vector<FamilyTest> read_family(const std::string& path);

Comparison compare(const std::vector<TrialResult>& results, int64_t bootstrap_samples = 1000, uint64_t seed = 1,
                   const std::vector<FamilyTest>& family = {});

// A metric as the tables print it: 2 decimals when `like` (the mean it goes with) is 10 or more, else 4.
std::string number_text(double value, double like);
inline std::string number_text(double value) { return number_text(value, value); }

// comparison.json and comparison.md in `folder`, atomically.
void write_comparison(const Comparison& comparison, const std::string& folder);

}  // namespace hnas::experiments
