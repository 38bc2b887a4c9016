#include "experiments/compare.h"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <limits>
#include <map>
#include <optional>

#include "base/atomic_file.h"
#include "base/check.h"
#include "base/json.h"
#include "base/number_format.h"
#include "base/read_file.h"
#include "experiments/run_result.h"
#include "experiments/sweep.h"
#include "eval/statistics.h"

namespace hnas::experiments {

namespace fs = std::filesystem;

namespace {

// The numbers a trial reports: its test metrics, then what its training reached.
std::vector<std::pair<std::string, double>> numbers_of(const Json& result) {
    std::vector<std::pair<std::string, double>> numbers;
    for (const char* section : {"metrics", "training"}) {
        if (!result.contains(section)) continue;
        for (const auto& [name, value] : result.at(section).items()) {
            if (value.is_number() && name != "steps") numbers.emplace_back(name, value.get<double>());
        }
    }
    return numbers;
}


struct Group {
    std::string setting;
    std::map<int64_t, const TrialResult*> by_seed;
};

// The trials by setting, in the order the settings first appear; a setting's seeds are distinct.
std::vector<Group> group_by_setting(const std::vector<TrialResult>& results) {
    std::vector<Group> groups;
    for (const TrialResult& trial : results) {
        auto group = std::find_if(groups.begin(), groups.end(), [&](const Group& g) { return g.setting == trial.setting; });
        if (group == groups.end()) group = groups.insert(groups.end(), Group{trial.setting, {}});
        HNAS_CHECK(group->by_seed.emplace(trial.seed, &trial).second, "compare: setting ", trial.setting, " has two runs of seed ",
                   trial.seed, ": ", group->by_seed.at(trial.seed)->run, " and ", trial.run);
    }
    return groups;
}

// Every metric any trial reports, in the order they first appear.
std::vector<std::string> metric_names(const std::vector<TrialResult>& results) {
    std::vector<std::string> metrics;
    for (const TrialResult& trial : results) {
        for (const auto& [name, value] : numbers_of(trial.result)) {
            if (std::find(metrics.begin(), metrics.end(), name) == metrics.end()) metrics.push_back(name);
        }
    }
    return metrics;
}

std::optional<double> metric_value(const TrialResult& trial, const std::string& metric) {
    for (const auto& [name, value] : numbers_of(trial.result)) {
        if (name == metric) return value;
    }
    return std::nullopt;
}

// One row per setting: each metric's summary over seeds, as JSON entries and as a Markdown table.
struct SettingSummaries {
    Json settings = Json::array();
    std::string table;
};

SettingSummaries summarize_settings(const std::vector<Group>& groups, const std::vector<std::string>& metrics) {
    SettingSummaries out;
    out.table = "| setting | seeds |";
    std::string rule = "|---|---|";
    for (const std::string& metric : metrics) {
        out.table += " " + metric + " |";
        rule += "---|";
    }
    out.table += "\n" + rule + "\n";
    for (const Group& group : groups) {
        Json entry = {{"setting", group.setting}, {"seeds", Json::array()}, {"metrics", Json::object()}};
        for (const auto& [trial_seed, trial] : group.by_seed) entry["seeds"].push_back(trial_seed);
        out.table += "| " + group.setting + " | " + std::to_string(group.by_seed.size()) + " |";
        for (const std::string& metric : metrics) {
            std::vector<double> values;
            for (const auto& [trial_seed, trial] : group.by_seed) {
                if (auto value = metric_value(*trial, metric)) values.push_back(*value);
            }
            if (values.empty()) {
                out.table += " |";
                continue;
            }
            const eval::Summary s = eval::summarize(values);
            entry["metrics"][metric] = {{"n", s.n},     {"mean", s.mean}, {"standard_error", s.standard_error}, {"ci95", s.ci95},
                                        {"min", s.min}, {"max", s.max},   {"values", values}};
            // One seed has no spread: "± 0.00" would claim a certainty nothing measured.
            if (s.n == 1) {
                out.table += fmt::format(" {} (one seed) |", number_text(s.mean));
                continue;
            }
            out.table += fmt::format(" {} ± {} (95 % CI ± {}; {} – {}) |", number_text(s.mean), number_text(s.standard_error, s.mean),
                                     number_text(s.ci95, s.mean), number_text(s.min, s.mean), number_text(s.max, s.mean));
        }
        out.table += "\n";
        out.settings.push_back(std::move(entry));
    }
    return out;
}

// A metric's values in two settings on the seeds both have it for.
struct SharedSeeds {
    std::vector<double> a, b;
    std::vector<int64_t> seeds;
};

SharedSeeds shared_seeds(const Group& a, const Group& b, const std::string& metric) {
    SharedSeeds out;
    for (const auto& [trial_seed, trial] : a.by_seed) {
        const auto other = b.by_seed.find(trial_seed);
        if (other == b.by_seed.end()) continue;
        const auto x = metric_value(*trial, metric), y = metric_value(*other->second, metric);
        if (!x || !y) continue;
        out.a.push_back(*x);
        out.b.push_back(*y);
        out.seeds.push_back(trial_seed);
    }
    return out;
}

// Per test example, a's and b's scores in strata for the paired bootstrap: one stratum of each example
// averaged over the shared seeds where every seed scored as many examples (the k-th example of each seed's
// test, the same for a and b), else one stratum per seed (masked-LM masks other tokens under each seed);
// nothing unless a and b ran the same test with per-example scores under every shared seed.
struct ExampleStrata {
    std::vector<std::vector<double>> a, b;
    bool by_seed = false;
};

std::optional<ExampleStrata> paired_examples(const Group& a, const Group& b, const std::vector<int64_t>& shared,
                                             const std::string& metric) {
    ExampleStrata strata;
    for (const int64_t s : shared) {
        const Json& ra = a.by_seed.at(s)->result;
        const Json& rb = b.by_seed.at(s)->result;
        const Json none = Json::object();
        const Json& pa = ra.value("per_example", none);
        const Json& pb = rb.value("per_example", none);
        // The same test set, decoded and scored the same way.
        const bool same_test = ra.value("test_settings", none) == rb.value("test_settings", none);
        if (!same_test || !pa.contains(metric) || !pb.contains(metric) || pa.at(metric).size() != pb.at(metric).size() ||
            pa.at(metric).empty()) {
            return std::nullopt;
        }
        strata.a.push_back(pa.at(metric).get<std::vector<double>>());
        strata.b.push_back(pb.at(metric).get<std::vector<double>>());
    }
    if (strata.a.empty()) return std::nullopt;
    const size_t examples = strata.a.front().size();
    strata.by_seed = std::any_of(strata.a.begin(), strata.a.end(), [&](const auto& seed) { return seed.size() != examples; });
    if (strata.by_seed) return strata;
    ExampleStrata averaged;
    averaged.a.assign(1, std::vector<double>(examples, 0.0));
    averaged.b.assign(1, std::vector<double>(examples, 0.0));
    for (size_t s = 0; s < strata.a.size(); ++s) {
        for (size_t k = 0; k < examples; ++k) {
            averaged.a[0][k] += strata.a[s][k] / static_cast<double>(shared.size());
            averaged.b[0][k] += strata.b[s][k] / static_cast<double>(shared.size());
        }
    }
    return averaged;
}

// Every pair of settings, per metric on their shared seeds: JSON entries, and per test kind how many
// tests its family holds.
struct PairedDifferences {
    Json pairs = Json::array();
    Json families = Json::object();
    size_t fewest_seeds = std::numeric_limits<size_t>::max();  // shared by a compared pair
};

// One pair's comparison of one metric on the seeds the settings share (`shared` not empty).
void add_paired_difference(const Group& a, const Group& b, const std::string& metric, const SharedSeeds& shared,
                           int64_t bootstrap_samples, uint64_t seed, PairedDifferences& out) {
    out.fewest_seeds = std::min(out.fewest_seeds, shared.seeds.size());
    const eval::PairedTest seeds = eval::paired_permutation_test(shared.a, shared.b, 100000, seed);
    Json entry = {{"a", a.setting},
                  {"b", b.setting},
                  {"metric", metric},
                  {"seeds", shared.seeds},
                  {"mean_difference", seeds.mean_difference},
                  {"permutation", {{"effect_size", seeds.effect_size}, {"p_value", seeds.p_value}, {"resamples", seeds.resamples}}}};
    if (const auto strata = paired_examples(a, b, shared.seeds, metric)) {
        const eval::PairedTest examples = eval::stratified_paired_bootstrap_test(strata->a, strata->b, bootstrap_samples, seed);
        entry["bootstrap"] = {{"examples", examples.pairs},
                              {"mean_difference", examples.mean_difference},
                              {"effect_size", examples.effect_size},
                              {"p_value", examples.p_value},
                              {"resamples", examples.resamples}};
        if (strata->by_seed) entry["bootstrap"]["within_each_seed"] = true;
    }
    out.pairs.push_back(std::move(entry));
}

bool names_pair(const FamilyTest& test, const Json& pair) {
    const std::string a = pair.at("a").get<std::string>(), b = pair.at("b").get<std::string>();
    return pair.at("metric").get<std::string>() == test.metric && ((a == test.a && b == test.b) || (a == test.b && b == test.a));
}

bool in_family(const std::vector<FamilyTest>& family, const Json& pair) {
    return family.empty() || std::any_of(family.begin(), family.end(), [&](const FamilyTest& t) { return names_pair(t, pair); });
}

// A family is every test of one kind ("permutation" over seeds, "bootstrap" over examples) in the
// comparison, over every pair of settings and every metric (a reader scans them all for a small p), or
// those of the named tests: each gains "p_holm", Holm's adjustment within its family; a test outside a
// named family gains null.
void adjust_family(const char* test, const std::vector<FamilyTest>& family, PairedDifferences& out) {
    std::vector<Json*> tests;
    std::vector<double> p_values;
    for (Json& pair : out.pairs) {
        if (!pair.contains(test)) continue;
        if (!in_family(family, pair)) {
            pair.at(test)["p_holm"] = nullptr;
            continue;
        }
        tests.push_back(&pair.at(test));
        p_values.push_back(pair.at(test).at("p_value").get<double>());
    }
    const std::vector<double> adjusted = eval::holm_adjusted(p_values);
    for (size_t i = 0; i < tests.size(); ++i) (*tests[i])["p_holm"] = adjusted[i];
    out.families[test] = tests.size();
}

// Every named test must be one of the comparison's.
void check_family(const std::vector<FamilyTest>& family, const PairedDifferences& out, const std::vector<Group>& groups) {
    for (const FamilyTest& test : family) {
        if (std::any_of(out.pairs.begin(), out.pairs.end(), [&](const Json& pair) { return names_pair(test, pair); })) continue;
        std::string settings;
        for (const Group& group : groups) settings += (settings.empty() ? "" : ", ") + group.setting;
        throw Error("compare: the family names " + test.a + " − " + test.b + " on " + test.metric +
                    ", which this comparison does not hold (two of its settings with that metric on shared seeds); its "
                    "settings: " + settings);
    }
}

PairedDifferences paired_differences(const std::vector<Group>& groups, const std::vector<std::string>& metrics,
                                     int64_t bootstrap_samples, uint64_t seed, const std::vector<FamilyTest>& family) {
    PairedDifferences out;
    for (size_t i = 0; i < groups.size(); ++i) {
        for (size_t j = i + 1; j < groups.size(); ++j) {
            for (const std::string& metric : metrics) {
                const SharedSeeds shared = shared_seeds(groups[i], groups[j], metric);
                if (!shared.seeds.empty()) add_paired_difference(groups[i], groups[j], metric, shared, bootstrap_samples, seed, out);
            }
        }
    }
    check_family(family, out, groups);
    adjust_family("permutation", family, out);
    adjust_family("bootstrap", family, out);
    return out;
}

// A p-value cell: "–" for a test outside the named family.
std::string p_text(const Json& p) { return p.is_null() ? "–" : fmt::format("{:.4f}", portable(p.get<double>())); }

// The Markdown table's rows: each test's raw p, then its Holm-adjusted one.
std::string paired_rows(const Json& pairs) {
    std::string rows;
    for (const Json& pair : pairs) {
        const Json& seeds = pair.at("permutation");
        rows += fmt::format("| {} | {} | {} | {} | {} | {:.2f} | {:.4f} | {} |", pair.at("a").get<std::string>(),
                            pair.at("b").get<std::string>(), pair.at("metric").get<std::string>(), pair.at("seeds").size(),
                            number_text(pair.at("mean_difference").get<double>()), portable(seeds.at("effect_size").get<double>()),
                            portable(seeds.at("p_value").get<double>()), p_text(seeds.at("p_holm")));
        if (!pair.contains("bootstrap")) {
            rows += " | | | |\n";
            continue;
        }
        const Json& examples = pair.at("bootstrap");
        rows += fmt::format(" {} | {:.3f} | {:.4f} | {} |\n", examples.at("examples").get<int64_t>(),
                            portable(examples.at("effect_size").get<double>()), portable(examples.at("p_value").get<double>()),
                            p_text(examples.at("p_holm")));
    }
    return rows;
}

std::string comparison_markdown(const SettingSummaries& settings, const PairedDifferences& differences, int64_t bootstrap_samples,
                                bool named_family) {
    std::string markdown = fmt::format(
        "Per setting: mean ± standard error over seeds (the 95 % confidence interval of the mean, Student's t; min – max)\n\n{}",
        settings.table);
    if (differences.pairs.empty()) return markdown;
    const int64_t bootstraps = differences.families.at("bootstrap").get<int64_t>();
    markdown += fmt::format(
        "\nPaired differences a − b on the seeds both have: Cohen's d_z, the two-sided paired permutation test over "
        "seeds, and for metrics scored per test example the paired bootstrap ({} resamples) over the examples' "
        "seed-averaged scores (resampled within each seed where the seeds scored different examples). Beside each "
        "p, Holm's adjustment within its family: {}permutation tests over seeds ({} in this table) are one "
        "family{}\n\n{}",
        bootstrap_samples, named_family ? "the named family's tests alone (any other is descriptive: –); its " : "",
        differences.families.at("permutation").get<int64_t>(),
        bootstraps > 0 ? fmt::format(", bootstrap tests over examples ({}) another", bootstraps) : std::string(),
        "| a | b | metric | seeds | a − b | d_z | p (permutation, seeds) | p Holm (seeds) | test examples | d_z | "
        "p (bootstrap, examples) | p Holm (examples) |\n"
        "|---|---|---|---|---|---|---|---|---|---|---|---|\n" +
            paired_rows(differences.pairs));
    // The exact test's smallest p is 2/2^n (every seed agreeing): below 6 seeds it cannot reach 0.05.
    if (differences.fewest_seeds < 6) {
        markdown += fmt::format(
            "\nSome pairs share only {} seeds: with n seeds the exact permutation test cannot go below p = 2/2^n "
            "({:.4f} here), so their differences over seeds cannot be established at 0.05; 6 seeds can.\n",
            differences.fewest_seeds, 2.0 / std::pow(2.0, static_cast<double>(differences.fewest_seeds)));
    }
    return markdown;
}

}  // namespace

std::string number_text(double value, double like) {
    return fmt::format("{:.{}f}", portable(value), std::fabs(like) >= 10 ? 2 : 4);
}

std::vector<TrialResult> collect_results(const std::vector<std::string>& paths) {
    std::vector<TrialResult> results;
    for (const std::string& path : paths) {
        for (const RunPath& run : find_runs(path, kResultFile, "compare")) {
            if (auto result = read_run_result(run.dir)) {
                const auto found = result->find("seed");
                const std::string what = "compare: " + (run.dir / kResultFile).string() + ": seed";
                const int64_t seed = found == result->end() ? 0
                                                            : json_integer(*found, std::numeric_limits<int64_t>::min(),
                                                                           std::numeric_limits<int64_t>::max(), what);
                results.push_back({run.setting, seed, run.dir.string(), std::move(*result)});
            }
        }
    }
    HNAS_CHECK(!results.empty(), "compare: no run with a result.json in ", paths.front(),
               paths.size() > 1 ? " or the other paths" : "", " (hnas test RUN_DIR writes one)");
    return results;
}

std::vector<FamilyTest> read_family(const std::string& path) {
    const std::string what = "compare: family file " + path;
    const Json tests = parse_json(read_file(path, "family file"), what + ":");
    HNAS_CHECK(tests.is_array() && !tests.empty(), what, " must be a non-empty JSON array of {\"a\", \"b\", \"metric\"}");
    std::vector<FamilyTest> family;
    for (size_t i = 0; i < tests.size(); ++i) {
        const Json& test = tests[i];
        const std::string where = what + " entry " + std::to_string(i + 1);
        HNAS_CHECK(test.is_object() && test.size() == 3, where, " must be an object of exactly \"a\", \"b\" and \"metric\"");
        const auto text = [&](const char* key) {
            HNAS_CHECK(test.contains(key) && test.at(key).is_string() && !test.at(key).get<std::string>().empty(), where,
                       ": \"", key, "\" must be a non-empty string");
            return test.at(key).get<std::string>();
        };
        family.push_back({text("a"), text("b"), text("metric")});
        HNAS_CHECK(family.back().a != family.back().b, where, " compares ", family.back().a, " with itself");
    }
    return family;
}

Comparison compare(const std::vector<TrialResult>& results, int64_t bootstrap_samples, uint64_t seed,
                   const std::vector<FamilyTest>& family) {
    const std::vector<Group> groups = group_by_setting(results);
    const std::vector<std::string> metrics = metric_names(results);
    const SettingSummaries settings = summarize_settings(groups, metrics);
    const PairedDifferences differences = paired_differences(groups, metrics, bootstrap_samples, seed, family);
    Comparison out;
    out.json = {{"settings", settings.settings},
                {"pairs", differences.pairs},
                {"families", differences.families},
                {"bootstrap_samples", bootstrap_samples},
                {"seed", seed}};
    if (!family.empty()) {
        out.json["family"] = Json::array();
        for (const FamilyTest& test : family) out.json["family"].push_back({{"a", test.a}, {"b", test.b}, {"metric", test.metric}});
    }
    out.markdown = comparison_markdown(settings, differences, bootstrap_samples, !family.empty());
    return out;
}

void write_comparison(const Comparison& comparison, const std::string& folder) {
    fs::create_directories(folder);
    write_file_atomically((fs::path(folder) / "comparison.json").string(), comparison.json.dump(2) + "\n");
    write_file_atomically((fs::path(folder) / "comparison.md").string(), comparison.markdown);
}

}  // namespace hnas::experiments
