// Experiments over settings and seeds: grid expansion and naming, the comparison's
// statistics on hand-made results, and `hnas sweep` end to end: killed with SIGKILL and rerun, every
// trial trains once and is tested; --parallel never asks for more threads than cores; under mpirun the
// ranks share the trials without overlap.
#include <signal.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <limits>
#include <map>
#include <thread>

#include "base/json.h"
#include "config/experiment_config.h"
#include "distributed/communicator.h"
#include "experiments/child_process.h"
#include "experiments/compare.h"
#include "experiments/grid.h"
#include "experiments/prediction.h"
#include "experiments/run_result.h"
#include "experiments/sweep.h"
#include "train/run_directory.h"
#include "tasks/task.h"
#include "test_support.h"

namespace hnas::experiments {
namespace {

namespace fs = std::filesystem;

std::vector<std::string> names_of(const std::vector<Setting>& settings) {
    std::vector<std::string> names;
    for (const Setting& setting : settings) names.push_back(setting.name);
    return names;
}

TEST(Grid, ExpandsEveryCombinationFirstAxisSlowest) {
    const auto settings = expand_grid({parse_grid_axis("model.attention.encoder.kind=[lnas,dnas]"),
                                       parse_grid_axis("train.learning_rate=[0.001, 0.0003]")});
    EXPECT_EQ(names_of(settings), (std::vector<std::string>{"kind=lnas,learning_rate=0.001", "kind=lnas,learning_rate=0.0003",
                                                            "kind=dnas,learning_rate=0.001", "kind=dnas,learning_rate=0.0003"}));
    EXPECT_EQ(settings[3].assignments(),
              (std::vector<std::string>{"model.attention.encoder.kind=\"dnas\"", "train.learning_rate=0.0003"}));
    EXPECT_EQ(names_of(expand_grid({})), std::vector<std::string>{"base"});
}

TEST(Grid, NamesUseTheShortestSuffixThatTellsKeysApart) {
    const auto settings = expand_grid({parse_grid_axis("model.attention.encoder.kind=[\"lnas\"]"),
                                       parse_grid_axis("model.attention.decoder.kind=[dnas]")});
    EXPECT_EQ(names_of(settings), std::vector<std::string>{"encoder.kind=lnas,decoder.kind=dnas"});
    // JSON values keep their type; characters a folder name should not hold become '_'.
    const GridAxis axis = parse_grid_axis("data.labels=[[\"a b\",\"c\"], 3, true]");
    ASSERT_EQ(axis.values.size(), 3u);
    EXPECT_TRUE(axis.values[0].is_array());
    EXPECT_EQ(names_of(expand_grid({axis})), (std::vector<std::string>{"labels=__a_b___c__", "labels=3", "labels=true"}));
}

TEST(Grid, BadArgumentsAreNamed) {
    EXPECT_CONTAINS(testing::error_of([] { parse_grid_axis("seed"); }), "--grid seed: expected key.path=[value,…]");
    EXPECT_CONTAINS(testing::error_of([] { parse_grid_axis("seed=1"); }), "must be a bracketed list");
    EXPECT_CONTAINS(testing::error_of([] { parse_grid_axis("seed=[1,,2]"); }), "an empty value");
    EXPECT_CONTAINS(testing::error_of([] { expand_grid({parse_grid_axis("seed=[1]"), parse_grid_axis("seed=[2]")}); }),
                    "the key is given twice");
    EXPECT_CONTAINS(testing::error_of([] { expand_grid({parse_grid_axis("a=[x_y, x/y]")}); }),
                    "two settings are both named a=x_y");
}

TEST(Grid, ListFile) {
    const testing::ScratchDir scratch("hnas_grid_list_");
    const auto settings = read_setting_list(scratch.write(
        "list.json", R"([{"model.attention.encoder.kind": "hnas", "model.attention.encoder.hybrid_init": 0.5},
                         {"model.attention.encoder.kind": "lnas"}])"));
    EXPECT_EQ(names_of(settings), (std::vector<std::string>{"kind=hnas,hybrid_init=0.5", "kind=lnas"}));
    EXPECT_CONTAINS(testing::error_of([&] { read_setting_list(scratch.write("bad.json", "[1]")); }),
                    "item 0 is a number, not an object of overrides");
    // Named settings (paper 002's mixers differ in several keys at once) beside named-by-overrides ones.
    const auto named = read_setting_list(scratch.write(
        "named.json", R"([{"name": "NAP", "set": {"model.norm": "mte", "model.attention.encoder.kind": "nap"}},
                          {"model.attention.encoder.kind": "lnas"}])"));
    EXPECT_EQ(names_of(named), (std::vector<std::string>{"NAP", "kind=lnas"}));
    EXPECT_EQ(named[0].assignments(), (std::vector<std::string>{"model.norm=\"mte\"", "model.attention.encoder.kind=\"nap\""}));
    EXPECT_CONTAINS(testing::error_of([&] {
                        read_setting_list(scratch.write("slash.json", R"([{"name": "a/b", "set": {"seed": 1}}])"));
                    }),
                    "item 0 must be {\"name\": a folder name");
    EXPECT_CONTAINS(testing::error_of([&] {
                        read_setting_list(scratch.write("twice.json", R"([{"name": "A", "set": {"seed": 1}}, {"name": "A", "set": {"seed": 2}}])"));
                    }),
                    "two settings are both named A");
}

// A list's settings at every grid point: a learning-rate sweep over named architectures.
TEST(Grid, ListTimesGrid) {
    const testing::ScratchDir scratch("hnas_grid_cross_");
    const auto list = read_setting_list(scratch.write(
        "list.json", R"([{"name": "NAP", "set": {"model.attention.encoder.kind": "nap"}}, {"model.norm": "post"}])"));
    const std::vector<GridAxis> rates{parse_grid_axis("train.learning_rate=[0.001,0.003]")};
    const auto settings = cross(list, rates);
    EXPECT_EQ(names_of(settings), (std::vector<std::string>{"NAP,learning_rate=0.001", "NAP,learning_rate=0.003",
                                                            "norm=post,learning_rate=0.001", "norm=post,learning_rate=0.003"}));
    EXPECT_EQ(settings[1].assignments(),
              (std::vector<std::string>{"model.attention.encoder.kind=\"nap\"", "train.learning_rate=0.003"}));
    EXPECT_EQ(names_of(cross(list, {})), names_of(list));
    EXPECT_CONTAINS(testing::error_of([&] { cross(list, {parse_grid_axis("model.norm=[mte,pre]")}); }),
                    "--grid model.norm: the list's setting norm=post sets it too");
}

// The shipped setting lists (configs/sweeps/) apply to the configs they are for: every setting's
// overrides parse on each of them.
TEST(Grid, ShippedListsApplyToTheirConfigs) {
    const std::string configs = std::string(HNAS_SOURCE_DIR) + "/configs/";
    for (const char* list : {"sweeps/paper002_mixers.json", "sweeps/paper002_mixers_d64.json"}) {
        const auto mixers = read_setting_list(configs + list);
        EXPECT_EQ(names_of(mixers), (std::vector<std::string>{"BERT", "MTE", "NAP", "NON", "sum", "max", "DNAS", "HNAS", "sinkhorn"}));
        for (const char* base : {"paper002_cases.json", "paper002_cases_first_token.json", "paper002_mode.json"}) {
            for (const Setting& setting : mixers) {
                EXPECT_NO_THROW(tasks::load_config(configs + base, setting.assignments()))
                    << list << " on " << base << ": " << setting.name;
            }
        }
    }
    const std::vector<std::pair<std::string, std::vector<std::string>>> rate_lists{
        {"sweeps/paper002_learning_rate_d32.json",
         {"MTE,learning_rate=6.56e-05", "MTE,learning_rate=0.00243", "NAP,learning_rate=6.56e-05", "NAP,learning_rate=0.00243"}},
        {"sweeps/paper002_learning_rate_d32_dnas.json", {"DNAS,learning_rate=6.56e-05", "DNAS,learning_rate=0.00243"}}};
    for (const auto& [list, names] : rate_lists) {
        const auto rates = cross(read_setting_list(configs + list), {parse_grid_axis("train.learning_rate=[6.56e-5,2.43e-3]")});
        EXPECT_EQ(names_of(rates), names) << list;
        for (const Setting& setting : rates) {
            EXPECT_NO_THROW(tasks::load_config(configs + "paper002_cases.json", setting.assignments())) << setting.name;
        }
    }
    // Random weights and the shipped pretrained encoders (data/pretrained/, paths from the checkout's root).
    const auto headline_kinds = read_setting_list(configs + "sweeps/gigaword_recipe_kinds.json");
    EXPECT_EQ(names_of(headline_kinds), (std::vector<std::string>{"lnas", "dnas", "hnas_u0.1", "hnas_u0.5", "lnas_bert", "hnas_bert"}));
    for (const Setting& setting : headline_kinds) {
        const auto config = tasks::load_config(configs + "gigaword_recipe.json", setting.assignments());
        if (!config.init_from.empty()) {
            EXPECT_TRUE(fs::exists(fs::path(HNAS_SOURCE_DIR) / config.init_from)) << setting.name;
        }
    }
    const auto views = read_setting_list(configs + "sweeps/paper004_multiview.json");
    EXPECT_EQ(names_of(views), (std::vector<std::string>{"pooled_sum", "pooled_max", "LNAS", "DNAS", "HNAS", "sinkhorn"}));
    for (const Setting& setting : views) {
        EXPECT_NO_THROW(tasks::load_config(configs + "paper004_multiview.json", setting.assignments())) << setting.name;
    }
}

// A result.json as `hnas test` writes it, with the given test metric and per-example scores.
void write_result(const fs::path& run, int64_t seed, double rouge, const std::vector<double>& per_example) {
    fs::create_directories(run);
    const Json result = {{"seed", seed},
                         {"metrics", {{"rouge_l", rouge}}},
                         {"per_example", {{"rouge_l", per_example}}},
                         {"training", {{"final_train_loss", 2.0 + 0.1 * static_cast<double>(seed)}, {"steps", 10}}}};
    testing::write_file((run / kResultFile).string(), result.dump());
}

TEST(Compare, SummariesAndPairedTestsOverSeedsAndExamples) {
    const testing::ScratchDir scratch("hnas_compare_");
    // Setting a beats b by 1, 2 and 3 points on seeds 1-3; on the examples a is ahead on every one.
    for (int64_t seed = 1; seed <= 3; ++seed) {
        const double gap = static_cast<double>(seed);
        write_result(scratch.root / "a" / ("seed-" + std::to_string(seed)), seed, 30 + gap, {31, 32, 33, 34});
        write_result(scratch.root / "b" / ("seed-" + std::to_string(seed)), seed, 30, {30, 30.5, 31, 33});
    }
    const Comparison comparison = compare(collect_results({scratch.root.string()}), 2000, 7);
    const Json& a = comparison.json.at("settings").at(0);
    EXPECT_EQ(a.at("setting"), "a");
    const Json& rouge = a.at("metrics").at("rouge_l");
    EXPECT_DOUBLE_EQ(rouge.at("mean").get<double>(), 32.0);
    EXPECT_NEAR(rouge.at("standard_error").get<double>(), 1.0 / std::sqrt(3.0), 1e-12);  // sd 1 over √3
    EXPECT_EQ(rouge.at("min").get<double>(), 31.0);
    EXPECT_EQ(rouge.at("max").get<double>(), 33.0);
    const Json& pair = comparison.json.at("pairs").at(0);
    EXPECT_EQ(pair.at("metric"), "rouge_l");
    EXPECT_DOUBLE_EQ(pair.at("mean_difference").get<double>(), 2.0);
    // Differences 1, 2, 3 over seeds: of 8 sign patterns, 2 reach |6|.
    EXPECT_DOUBLE_EQ(pair.at("permutation").at("p_value").get<double>(), 0.25);
    // Every example is better in a (1, 1.5, 2, 1): no resample's mean difference reaches 0.
    EXPECT_EQ(pair.at("bootstrap").at("examples"), 4);
    EXPECT_DOUBLE_EQ(pair.at("bootstrap").at("p_value").get<double>(), 0.0);
    // The training numbers are compared too; the step count is not a metric.
    EXPECT_TRUE(a.at("metrics").contains("final_train_loss"));
    EXPECT_FALSE(a.at("metrics").contains("steps"));
    EXPECT_CONTAINS(comparison.markdown, "| a | 3 | 32.00 ± 0.58 (95 % CI ± 2.48; 31.00 – 33.00) |");
    // Two permutation tests (rouge_l and the training loss, whose p is 1): Holm doubles the smaller p.
    // One bootstrap test: a family of one, not adjusted.
    EXPECT_DOUBLE_EQ(pair.at("permutation").at("p_holm").get<double>(), 0.5);
    EXPECT_DOUBLE_EQ(pair.at("bootstrap").at("p_holm").get<double>(), 0.0);
    EXPECT_EQ(comparison.json.at("families"), (Json{{"permutation", 2}, {"bootstrap", 1}}));
    EXPECT_CONTAINS(comparison.markdown, "| a | b | rouge_l | 3 | 2.0000 | 2.00 | 0.2500 | 0.5000 | 4 | 2.872 | 0.0000 | 0.0000 |");
    EXPECT_CONTAINS(comparison.markdown, "| a | b | final_train_loss | 3 | 0.0000 | 0.00 | 1.0000 | 1.0000 | | | | |");
    EXPECT_CONTAINS(comparison.markdown, "permutation tests over seeds (2 in this table) are one family, bootstrap tests over "
                                         "examples (1) another");
    EXPECT_CONTAINS(comparison.markdown, "| p (permutation, seeds) | p Holm (seeds) | test examples | d_z | "
                                         "p (bootstrap, examples) | p Holm (examples) |");
    // One seed has no spread to show.
    const testing::ScratchDir single("hnas_compare_single_");
    write_result(single.root / "c" / "seed-1", 1, 30, {31, 32});
    EXPECT_CONTAINS(compare(collect_results({single.root.string()})).markdown, "| c | 1 | 30.00 (one seed) |");
    // 3 seeds: the exact test's floor is 2/8, which the table says.
    EXPECT_CONTAINS(comparison.markdown, "Some pairs share only 3 seeds");
    EXPECT_CONTAINS(comparison.markdown, "(0.2500 here)");
    // The output folder (compare's --out) need not exist yet.
    const testing::ScratchDir written("hnas_compare_out_");
    const fs::path folder = written.root / "new" / "folder";
    write_comparison(comparison, folder.string());
    EXPECT_EQ(hnas::read_file((folder / "comparison.md").string(), "comparison"), comparison.markdown);
    EXPECT_TRUE(fs::exists(folder / "comparison.json"));

    // Scores of another test set are not paired example by example.
    Json other = Json::parse(hnas::read_file((scratch.root / "b" / "seed-1" / kResultFile).string(), "run result"));
    other["test_settings"] = {{"articles", "another.txt"}};
    testing::write_file((scratch.root / "b" / "seed-1" / kResultFile).string(), other.dump());
    const Comparison mixed = compare(collect_results({scratch.root.string()}), 2000, 7);
    EXPECT_FALSE(mixed.json.at("pairs").at(0).contains("bootstrap"));
    EXPECT_TRUE(mixed.json.at("pairs").at(0).contains("permutation"));
}

// Masked-LM masks other tokens under each seed (the same ones in every setting): seeds that scored
// different numbers of examples are resampled each apart, not averaged example by example.
TEST(Compare, BootstrapsWithinEachSeedWhenTheSeedsScoredDifferentExamples) {
    const testing::ScratchDir scratch("hnas_compare_strata_");
    write_result(scratch.root / "a" / "seed-1", 1, 0.67, {1, 1, 0});
    write_result(scratch.root / "b" / "seed-1", 1, 0.33, {0, 1, 0});
    write_result(scratch.root / "a" / "seed-2", 2, 0.5, {1, 0});
    write_result(scratch.root / "b" / "seed-2", 2, 0.0, {0, 0});
    const Comparison strata = compare(collect_results({scratch.root.string()}), 1000, 7);
    const Json& bootstrap = strata.json.at("pairs").at(0).at("bootstrap");
    EXPECT_EQ(bootstrap.at("examples"), 5);
    EXPECT_TRUE(bootstrap.at("within_each_seed").get<bool>());
    EXPECT_DOUBLE_EQ(bootstrap.at("mean_difference").get<double>(), (1.0 / 3.0 + 1.0 / 2.0) / 2.0);
    // As many examples under every seed: the k-th of each is averaged over the seeds, as before.
    write_result(scratch.root / "a" / "seed-2", 2, 0.5, {1, 0, 1});
    write_result(scratch.root / "b" / "seed-2", 2, 0.0, {0, 0, 0});
    const Comparison seed_averaged = compare(collect_results({scratch.root.string()}), 1000, 7);
    const Json& averaged = seed_averaged.json.at("pairs").at(0).at("bootstrap");
    EXPECT_EQ(averaged.at("examples"), 3);
    EXPECT_FALSE(averaged.contains("within_each_seed"));
}

// Holm's adjustment runs over a family of the whole comparison: every pair of settings and every metric
// for the permutation tests, every bootstrap test for the other. Three settings, 6 seeds, two metrics:
// rouge_l's permutation p are 2/64 (a − b: 1, 1, 1, 1, 1, 3), 2/64 (a − c: 2 on every seed) and 14/64
// (b − c: five 1s and a −1); the training loss's three are 1. Sorted, 6 · 2/64, 5 · 2/64 raised to it, and
// 4 · 14/64: a − b and a − c 0.1875, b − c 0.875 (Bonferroni would give 1, families per metric 0.09375).
TEST(Compare, HolmAdjustsEachFamilyOverEveryPairAndMetric) {
    const testing::ScratchDir scratch("hnas_compare_holm_");
    for (int64_t seed = 1; seed <= 6; ++seed) {
        const std::string folder = "seed-" + std::to_string(seed);
        write_result(scratch.root / "a" / folder, seed, 32, {33, 34});
        write_result(scratch.root / "b" / folder, seed, seed == 6 ? 29 : 31, {30, 31});
        write_result(scratch.root / "c" / folder, seed, 30, {30, 31});
    }
    const Comparison comparison = compare(collect_results({scratch.root.string()}));
    EXPECT_EQ(comparison.json.at("families"), (Json{{"permutation", 6}, {"bootstrap", 3}}));
    std::map<std::string, std::pair<double, double>> permutation, bootstrap;  // "a-b" → raw p, Holm p
    for (const Json& pair : comparison.json.at("pairs")) {
        const std::string key = pair.at("a").get<std::string>() + "-" + pair.at("b").get<std::string>();
        const auto p = [](const Json& test) { return std::pair{test.at("p_value").get<double>(), test.at("p_holm").get<double>()}; };
        if (pair.at("metric") == "final_train_loss") {
            EXPECT_EQ(p(pair.at("permutation")), std::pair(1.0, 1.0)) << key;
            EXPECT_FALSE(pair.contains("bootstrap")) << key;
            continue;
        }
        permutation[key] = p(pair.at("permutation"));
        bootstrap[key] = p(pair.at("bootstrap"));
    }
    EXPECT_EQ(permutation.at("a-b"), std::pair(2.0 / 64, 0.1875));
    EXPECT_EQ(permutation.at("a-c"), std::pair(2.0 / 64, 0.1875));
    EXPECT_EQ(permutation.at("b-c"), std::pair(14.0 / 64, 0.875));
    // a is ahead on every example (p 0); b and c score the same (p 1): 3 · 0, 2 · 0 and 1 · 1.
    EXPECT_EQ(bootstrap.at("a-b"), std::pair(0.0, 0.0));
    EXPECT_EQ(bootstrap.at("a-c"), std::pair(0.0, 0.0));
    EXPECT_EQ(bootstrap.at("b-c"), std::pair(1.0, 1.0));
    EXPECT_CONTAINS(comparison.markdown, "| b | c | rouge_l | 6 | 0.6667 | 0.82 | 0.2188 | 0.8750 | 2 | 0.000 | 1.0000 | 1.0000 |");
    EXPECT_CONTAINS(comparison.markdown, "(6 in this table) are one family, bootstrap tests over examples (3) another");
}

// A family named before the runs (--family FILE): Holm's adjustment runs over its tests alone. The data of
// the test above; the family names c − a and b − c on rouge_l (either order): their permutation p 2/64 and
// 14/64 become 2 · 2/64 = 0.0625 and 14/64; a − b's is outside, null ("–"), as is every bootstrap test but
// theirs (0 and 1, each kept: 2 · 0 and 1).
TEST(Compare, NamedFamilyAdjustsOnlyItsTests) {
    const testing::ScratchDir scratch("hnas_compare_family_");
    for (int64_t seed = 1; seed <= 6; ++seed) {
        const std::string folder = "seed-" + std::to_string(seed);
        write_result(scratch.root / "runs" / "a" / folder, seed, 32, {33, 34});
        write_result(scratch.root / "runs" / "b" / folder, seed, seed == 6 ? 29 : 31, {30, 31});
        write_result(scratch.root / "runs" / "c" / folder, seed, 30, {30, 31});
    }
    const std::string file = scratch.write("family.json", R"([{"a": "c", "b": "a", "metric": "rouge_l"},
                                                              {"a": "b", "b": "c", "metric": "rouge_l"}])");
    const Comparison comparison = compare(collect_results({(scratch.root / "runs").string()}), 1000, 1, read_family(file));
    EXPECT_EQ(comparison.json.at("families"), (Json{{"permutation", 2}, {"bootstrap", 2}}));
    EXPECT_EQ(comparison.json.at("family").size(), 2u);
    for (const Json& pair : comparison.json.at("pairs")) {
        const std::string key = pair.at("a").get<std::string>() + "-" + pair.at("b").get<std::string>() + " " +
                                pair.at("metric").get<std::string>();
        const Json& holm = pair.at("permutation").at("p_holm");
        if (key == "a-c rouge_l") {
            EXPECT_DOUBLE_EQ(holm.get<double>(), 0.0625);
            EXPECT_DOUBLE_EQ(pair.at("bootstrap").at("p_holm").get<double>(), 0.0);
        } else if (key == "b-c rouge_l") {
            EXPECT_DOUBLE_EQ(holm.get<double>(), 14.0 / 64);
            EXPECT_DOUBLE_EQ(pair.at("bootstrap").at("p_holm").get<double>(), 1.0);
        } else {
            EXPECT_TRUE(holm.is_null()) << key;
        }
    }
    EXPECT_CONTAINS(comparison.markdown, "| a | b | rouge_l | 6 | 1.3333 | 1.63 | 0.0312 | – | 2 | ");
    EXPECT_CONTAINS(comparison.markdown, " | 0.0000 | – |\n");
    EXPECT_CONTAINS(comparison.markdown, "the named family's tests alone (any other is descriptive: –); its permutation tests "
                                         "over seeds (2 in this table)");
    // A test the comparison does not hold, and malformed files, are refused by name.
    const std::string missing = scratch.write("missing.json", R"([{"a": "a", "b": "d", "metric": "rouge_l"}])");
    EXPECT_CONTAINS(testing::error_of([&] { compare(collect_results({(scratch.root / "runs").string()}), 1000, 1, read_family(missing)); }),
                    "compare: the family names a − d on rouge_l, which this comparison does not hold (two of its settings with "
                    "that metric on shared seeds); its settings: a, b, c");
    const std::string bad = scratch.write("bad.json", R"([{"a": "a", "b": "b", "metric": "rouge_l", "note": 1}])");
    EXPECT_CONTAINS(testing::error_of([&] { read_family(bad); }),
                    "compare: family file " + bad + " entry 1 must be an object of exactly \"a\", \"b\" and \"metric\"");
    const std::string self = scratch.write("self.json", R"([{"a": "a", "b": "a", "metric": "rouge_l"}])");
    EXPECT_CONTAINS(testing::error_of([&] { read_family(self); }), "entry 1 compares a with itself");
    const std::string empty = scratch.write("empty.json", "[]");
    EXPECT_CONTAINS(testing::error_of([&] { read_family(empty); }), "must be a non-empty JSON array");
}

TEST(Compare, RefusesTwoRunsOfOneSeed) {
    const testing::ScratchDir scratch("hnas_compare_twice_");
    write_result(scratch.root / "x" / "seed-1", 1, 30, {1});
    write_result(scratch.root / "more" / "x", 1, 31, {1});
    EXPECT_CONTAINS(testing::error_of([&] { compare(collect_results({scratch.root.string()})); }),
                    "setting x has two runs of seed 1");
    EXPECT_CONTAINS(testing::error_of([&] { collect_results({(scratch.root / "more" / "x" / "none").string()}); }),
                    "is not a folder");
}

// A result.json's seed must be an integer: get<int64_t>() would truncate 1.5 and cast 1e300 unchecked.
TEST(Compare, RefusesASeedThatIsNoInteger) {
    const testing::ScratchDir scratch("hnas_compare_seed_");
    write_result(scratch.root / "x" / "seed-1", 1, 30, {1});
    const std::string path = (scratch.root / "x" / "seed-1" / kResultFile).string();
    Json result = Json::parse(hnas::read_file(path, "run result"));
    for (const Json& seed : {Json(1.5), Json(1e300), Json("1")}) {
        result["seed"] = seed;
        testing::write_file(path, result.dump());
        EXPECT_CONTAINS(testing::error_of([&] { collect_results({scratch.root.string()}); }),
                        "compare: " + path + ": seed must be an integer in [-9223372036854775808, 9223372036854775807], got " +
                            seed.dump());
    }
}

// Integers read from files are checked before they are cast: a float (1e300 would be undefined), an
// unsigned beyond int64_t (it would wrap to -1) and anything outside [low, high] are hnas::Errors.
TEST(JsonInteger, ReadsOnlyIntegersInRange) {
    const auto error = [](const std::string& text) {
        return testing::error_of([&] { json_integer(parse_json(text, "test:"), -5, 5, "the value"); });
    };
    EXPECT_EQ(json_integer(parse_json("5", "test:"), -5, 5, "x"), 5);
    EXPECT_EQ(json_integer(parse_json("-5", "test:"), -5, 5, "x"), -5);
    constexpr int64_t kMax = std::numeric_limits<int64_t>::max();
    EXPECT_EQ(json_integer(parse_json("9223372036854775807", "test:"), 0, kMax, "x"), kMax);
    EXPECT_EQ(error("6"), "the value must be an integer in [-5, 5], got 6");
    EXPECT_EQ(error("-6"), "the value must be an integer in [-5, 5], got -6");
    EXPECT_EQ(error("1e300"), "the value must be an integer in [-5, 5], got 1e+300");
    EXPECT_EQ(error("2.0"), "the value must be an integer in [-5, 5], got 2.0");
    EXPECT_EQ(error("18446744073709551615"), "the value must be an integer in [-5, 5], got 18446744073709551615");
    EXPECT_EQ(error("\"3\""), "the value must be an integer in [-5, 5], got \"3\"");
    EXPECT_EQ(error("null"), "the value must be an integer in [-5, 5], got null");
    EXPECT_CONTAINS(testing::error_of([&] { json_integer(parse_json("9223372036854775808", "test:"), 0, kMax, "x"); }),
                    "got 9223372036854775808");
    // A long value is cut short in the message.
    std::string long_array = "[1";
    for (int i = 0; i < 500; ++i) long_array += ",1";
    long_array += "]";
    EXPECT_EQ(error(long_array).size(), std::string("the value must be an integer in [-5, 5], got ").size() + 80 + 3);
    EXPECT_EQ(json_number(parse_json("2", "test:"), "x"), 2.0);
    EXPECT_EQ(testing::error_of([] { json_number(parse_json("\"2\"", "test:"), "the count"); }),
              "the count must be a number, got \"2\"");
}

// A sweep record's setting names and seeds become folders below it: names that leave the sweep's
// folder or name none, and seeds that are no integers, are refused naming the record.
TEST(FindRuns, SweepRecordsNameOnlyFoldersBelowTheSweep) {
    const testing::ScratchDir scratch("hnas_find_runs_");
    const std::string record = (scratch.root / kSweepFile).string();
    const auto sweep_of = [](const Json& setting, const Json& seed) {
        return Json{{"settings", Json::array({setting})}, {"seeds", Json::array({seed})}};
    };
    const auto named = [](const Json& name) { return Json{{"name", name}, {"overrides", Json::object()}}; };
    const auto runs_error = [&](const Json& sweep) {
        testing::write_file(record, sweep.dump());
        return testing::error_of([&] { find_runs(scratch.root.string(), kResultFile, "compare"); });
    };
    testing::write_file(record, sweep_of(named("kind=lnas"), 2).dump());
    const std::vector<RunPath> runs = find_runs(scratch.root.string(), kResultFile, "compare");
    ASSERT_EQ(runs.size(), 1u);
    EXPECT_EQ(runs[0].dir, scratch.root / "kind=lnas" / "seed-2");
    const std::string where = "compare: sweep record " + record + ": ";
    for (const std::string& name : std::vector<std::string>{"..", ".", "", "a/b", "/etc", "../..", std::string("a\0b", 3)}) {
        EXPECT_CONTAINS(runs_error(sweep_of(named(name), 1)),
                        where + "the setting name " + Json(name).dump() + " is not a folder name");
    }
    for (const Json& setting : {Json{{"overrides", Json::object()}}, named(5), Json("x")}) {
        EXPECT_CONTAINS(runs_error(sweep_of(setting, 1)), where + "each setting must be an object with a \"name\" string");
    }
    EXPECT_CONTAINS(runs_error(sweep_of(named("x"), "1/../../y")), where + "a seed must be an integer in [");
    EXPECT_CONTAINS(runs_error(sweep_of(named("x"), 1.5)), where + "a seed must be an integer in [");
    EXPECT_CONTAINS(runs_error(Json{{"settings", "x"}, {"seeds", {1}}}), where + "\"settings\" must be an array");
    EXPECT_CONTAINS(runs_error(Json{{"settings", Json::array({named("x")})}}), where + "\"seeds\" must be an array");
    EXPECT_CONTAINS(runs_error(Json::array()), where + "\"settings\" must be an array");
}

// git in `folder` with an identity of its own (CI's root has none); its output, the test failing when git does.
std::string git(const fs::path& folder, const std::vector<std::string>& arguments) {
    const auto executable = find_on_path("git");
    if (!executable) {
        ADD_FAILURE() << "no git on PATH";
        return "";
    }
    std::vector<std::string> argv{executable->string(), "-C", folder.string(), "-c", "user.name=hnas tests", "-c",
                                  "user.email=tests@hnas.invalid", "-c", "commit.gpgsign=false"};
    argv.insert(argv.end(), arguments.begin(), arguments.end());
    const CommandOutput out = run_command(argv);
    EXPECT_EQ(out.status, 0) << "git " << arguments.front() << ": " << out.output;
    return out.output;
}

// `text` committed as `file` in the repository `folder` (made when missing); the commit's hash.
std::string commit_file(const fs::path& folder, const std::string& file, const std::string& text) {
    fs::create_directories((folder / file).parent_path());
    if (!fs::exists(folder / ".git")) git(folder, {"init", "-q"});
    testing::write_file((folder / file).string(), text);
    git(folder, {"add", "--", file});
    git(folder, {"commit", "-q", "-m", "write " + file});
    std::string hash = git(folder, {"rev-parse", "HEAD"});
    return hash.substr(0, hash.find('\n'));
}

// A prediction is a committed file: hnas records its text, its path in the repository and the commit
// that last changed it, and refuses, naming the file, one it cannot prove was committed.
TEST(Prediction, RecordsACommittedFileAndRefusesAnyOther) {
    ASSERT_TRUE(find_on_path("git")) << "no git on PATH (scripts/setup.sh installs it)";
    const testing::ScratchDir scratch("hnas_prediction_");
    const fs::path repository = scratch.root / "repository";
    const std::string name = "docs/experiments/predictions/tie.md";
    const std::string commit = commit_file(repository, name, "*lnas and dnas tie*\n");
    commit_file(repository, "other.md", "a later commit of another file");
    const std::string path = (repository / name).string();
    const Prediction prediction = read_committed_prediction(path);
    EXPECT_EQ(prediction.text, "*lnas and dnas tie*\n");
    EXPECT_EQ(prediction.file, name);
    EXPECT_EQ(prediction.commit, commit);
    EXPECT_EQ(commit.size(), 40u);

    const auto refusal = [](const std::string& file) { return testing::error_of([&] { read_committed_prediction(file); }); };
    testing::write_file(path, "*dnas wins*\n");
    EXPECT_CONTAINS(refusal(path), "sweep: --prediction " + path + ": has uncommitted changes");
    git(repository, {"add", "--", name});  // staged is not committed
    EXPECT_CONTAINS(refusal(path), "sweep: --prediction " + path + ": has uncommitted changes");
    const std::string untracked = scratch.write("repository/untracked.md", "x");
    EXPECT_CONTAINS(refusal(untracked), "sweep: --prediction " + untracked + ": not tracked by git");
    const std::string outside = scratch.write("outside.md", "x");
    EXPECT_CONTAINS(refusal(outside), "sweep: --prediction " + outside + ": not inside a git repository");
    EXPECT_CONTAINS(refusal(scratch.path("none.md")), "sweep: --prediction " + scratch.path("none.md") + ": no such file");
    // Without git nothing can show when the file was committed.
    const std::string path_variable = std::getenv("PATH");
    fs::create_directories(scratch.root / "empty");
    ::setenv("PATH", (scratch.root / "empty").c_str(), 1);
    const std::string without_git = refusal(outside);
    ::setenv("PATH", path_variable.c_str(), 1);
    EXPECT_CONTAINS(without_git, "sweep: --prediction " + outside + ": git is not on PATH");
}

// The sweep keeps the prediction's text, file and commit in sweep.json before its first run; a rerun
// may leave it out, but one with another prediction (the file changed and committed again) is refused,
// and so is a committed file against a sweep that stated its prediction as text (sweep.json before files).
TEST(Prediction, SweepKeepsTheFirstAndRefusesAnother) {
    ASSERT_TRUE(find_on_path("git")) << "no git on PATH (scripts/setup.sh installs it)";
    const testing::ScratchDir scratch("hnas_prediction_sweep_");
    const fs::path repository = scratch.root / "repository";
    const std::string first = commit_file(repository, "tie.md", "lnas and dnas tie\n");
    SweepOptions options;
    options.config = std::string(HNAS_SOURCE_DIR) + "/configs/gigaword_tiny.json";
    options.settings = {Setting{"lnas", {Override{"model.attention.encoder.kind", "lnas"}}}};
    options.seeds = 1;
    options.out = (scratch.root / "sweep").string();
    options.executable = "/bin/false";  // never started: the trial has its result already
    write_result(scratch.root / "sweep" / "lnas" / "seed-1", 1, 30, {31});
    const auto world = distributed::single_process();
    const auto sweep_json = [&] { return Json::parse(hnas::read_file(options.out + "/" + kSweepFile, "sweep record")); };

    // A file with uncommitted changes stops the sweep before it writes anything.
    testing::write_file((repository / "tie.md").string(), "lnas and dnas tie, probably\n");
    options.prediction_file = (repository / "tie.md").string();
    EXPECT_CONTAINS(testing::error_of([&] { run_sweep(options, *world); }), "has uncommitted changes");
    EXPECT_FALSE(fs::exists(options.out + "/" + kSweepFile));
    git(repository, {"checkout", "--", "tie.md"});

    run_sweep(options, *world);
    const Json record = sweep_json();
    EXPECT_EQ(record.at("prediction"), "lnas and dnas tie\n");
    EXPECT_EQ(record.at("prediction_file"), "tie.md");
    EXPECT_EQ(record.at("prediction_commit"), first);
    run_sweep(options, *world);  // the same prediction again
    options.prediction_file.clear();
    run_sweep(options, *world);  // none: the sweep keeps its own
    EXPECT_EQ(sweep_json(), record);

    const std::string second = commit_file(repository, "tie.md", "dnas wins\n");
    options.prediction_file = (repository / "tie.md").string();
    EXPECT_CONTAINS(testing::error_of([&] { run_sweep(options, *world); }),
                    "holds the prediction stated before its runs: \"tie.md\" as committed in \"" + first +
                        "\"; a prediction is stated once, before the first run");
    EXPECT_EQ(sweep_json(), record);

    Json text_only = record;
    text_only.erase("prediction_file");
    text_only.erase("prediction_commit");
    testing::write_file(options.out + "/" + kSweepFile, text_only.dump());
    EXPECT_CONTAINS(testing::error_of([&] { run_sweep(options, *world); }),
                    "holds the prediction stated before its runs: \"lnas and dnas tie\\n\"");
    options.prediction_file.clear();
    run_sweep(options, *world);
    EXPECT_EQ(sweep_json(), text_only);
}

// The tiny headline config of the sweep tests: 24 steps, a checkpoint every 4, its last checkpoint
// tested with beam 2 on 12 validation pairs.
class SweepEnvironment {
public:
    static const SweepEnvironment& get() {
        static const SweepEnvironment environment;
        return environment;
    }
    const testing::ScratchDir scratch{"hnas_sweep_test_"};
    std::string config;

private:
    SweepEnvironment() {
        const std::string gigaword = std::string(HNAS_SOURCE_DIR) + "/data/gigaword/";
        const std::string articles = scratch.head_of(gigaword + "train_10k/train.article.txt", 256, "articles.txt");
        const std::string titles = scratch.head_of(gigaword + "train_10k/train.title.txt", 256, "titles.txt");
        const std::string valid_articles = scratch.head_of(gigaword + "valid_1k/valid.article.filter.txt", 12, "valid_articles.txt");
        const std::string valid_titles = scratch.head_of(gigaword + "valid_1k/valid.title.filter.txt", 12, "valid_titles.txt");
        data::TokenizerTrainOptions options;
        options.inputs = {articles, titles};
        options.vocab_size = 300;
        const std::string tokenizer = scratch.train_tokenizer("tokenizer", options);
        const Json raw = {
            {"task", "headline"},
            {"model",
             {{"d_model", 32}, {"heads", 4}, {"ffn_dim", 64}, {"encoder_layers", 1}, {"decoder_layers", 1},
              {"max_source_positions", 48}, {"max_target_positions", 24},
              {"attention", {{"encoder", {{"kind", "hnas"}}}}}}},
            {"tokenizer", {{"model", tokenizer}}},
            {"data",
             {{"train_articles", articles}, {"train_titles", titles}, {"valid_articles", valid_articles},
              {"valid_titles", valid_titles}, {"max_source", 48}, {"max_target", 24}, {"batch_sentences", 16},
              {"shuffle_buffer", 128}}},
            {"train", {{"learning_rate", 3e-3}, {"warmup_steps", 2}, {"steps", 24}, {"log_every", 1}}},
            {"validation", {{"every", 8}, {"decode_examples", 4}, {"max_decode_length", 8}}},
            {"checkpoint", {{"every", 4}, {"keep", 2}}},
            {"test",
             {{"checkpoint", "last"}, {"articles", valid_articles}, {"references", valid_titles}, {"beam", 2}, {"max_length", 10},
              {"wordnet", std::string(HNAS_SOURCE_DIR) + "/data/wordnet"}}}};
        config = scratch.write("sweep.json", raw.dump(2));
    }
};

// The training steps a trial's metrics.jsonl logged, in order.
std::vector<int64_t> logged_steps(const fs::path& run) {
    std::vector<int64_t> steps;
    for (const std::string& line : testing::first_lines((run / "metrics.jsonl").string(), 100000)) {
        const Json record = Json::parse(line);
        if (record.contains("loss")) steps.push_back(record.at("step").get<int64_t>());
    }
    return steps;
}

std::vector<std::string> sweep_args(const std::string& out, int parallel) {
    return {"sweep", "--config", SweepEnvironment::get().config, "--grid", "model.attention.encoder.kind=[lnas,dnas]",
            "--seeds", "2", "--out", out, "--parallel", std::to_string(parallel), "--progress-every", "1"};
}

// Every trial of the 2 × 2 sweep in `out` trained each step once (resumed where it stopped), tested,
// and recorded where and with how many threads it ran.
void expect_sweep_complete(const fs::path& out) {
    for (const char* setting : {"kind=lnas", "kind=dnas"}) {
        for (const char* seed : {"seed-1", "seed-2"}) {
            const fs::path run = out / setting / seed;
            SCOPED_TRACE(run.string());
            std::vector<int64_t> expected(24);
            for (int64_t step = 0; step < 24; ++step) expected[static_cast<size_t>(step)] = step + 1;
            EXPECT_EQ(logged_steps(run), expected);
            const auto result = read_run_result(run);
            ASSERT_TRUE(result.has_value());
            EXPECT_EQ(result->at("step"), 24);
            EXPECT_EQ(result->at("per_example").at("rouge_l").size(), 12u);
            EXPECT_EQ(testing::first_lines((run / kTestOutputsFile).string(), 100).size(), 12u);
            const Json trial = Json::parse(hnas::read_file(out / setting / (std::string(seed) + ".trial.json"), "trial record"));
            EXPECT_TRUE(trial.at("trained").get<bool>());
            EXPECT_LE(trial.at("threads").get<int>() * trial.at("parallel").get<int>(), distributed::threads_per_rank(0, 1));
        }
    }
    EXPECT_CONTAINS(hnas::read_file(out / "comparison.md", "comparison"), "| kind=lnas | 2 |");
}

TEST(Sweep, KilledAndRerunTrainsEachTrialOnceThenCompares) {
    const auto& scratch = SweepEnvironment::get().scratch;
    const testing::RunDir out(scratch, "killed");
    const int parallel = std::min(2, distributed::threads_per_rank(0, 1));
    std::vector<std::string> command{HNAS_EXECUTABLE};
    for (const std::string& arg : sweep_args(out.path.string(), parallel)) command.push_back(arg);
    const std::string commit = commit_file(scratch.root / "killed_repository", "predictions/tie.md", "lnas and dnas tie\n");
    const std::string prediction = (scratch.root / "killed_repository" / "predictions" / "tie.md").string();
    command.insert(command.end(), {"--prediction", prediction});
    const testing::Subprocess first = testing::start_subprocess(command, scratch.path("killed.log"));
    // SIGKILL once a trial is past its first checkpoint: its child is told to checkpoint and stop.
    const bool started = testing::wait_until([&] {
        for (const char* setting : {"kind=lnas", "kind=dnas"}) {
            if (logged_steps(out.path / setting / "seed-1").size() >= 6) return true;
        }
        return false;
    });
    kill(first.pid, SIGKILL);
    testing::finish(first);
    ASSERT_TRUE(started) << first.output();
    const testing::Outcome rerun = testing::run_hnas(sweep_args(out.path.string(), parallel), scratch);
    ASSERT_EQ(rerun.exit_code(), 0) << rerun.output;
    EXPECT_CONTAINS(rerun.output, "resumed at step");
    expect_sweep_complete(out.path);
    // A finished sweep reruns as a no-op; another grid into the same folder is refused.
    const testing::Outcome again = testing::run_hnas(sweep_args(out.path.string(), 1), scratch);
    EXPECT_EQ(again.exit_code(), 0) << again.output;
    EXPECT_CONTAINS(again.output, "0 to run here");
    // The prediction was stated before the first run: a rerun cannot change it.
    commit_file(scratch.root / "killed_repository", "predictions/tie.md", "dnas wins\n");
    auto restated = sweep_args(out.path.string(), 1);
    restated.insert(restated.end(), {"--prediction", prediction});
    const testing::Outcome changed = testing::run_hnas(restated, scratch);
    EXPECT_EQ(changed.exit_code(), 1);
    EXPECT_CONTAINS(changed.output, "holds the prediction stated before its runs: \"predictions/tie.md\" as committed in \"" + commit);
    // The page of the whole sweep opens with the prediction, then the results.
    const testing::Outcome report = testing::run_hnas({"report", out.path.string()}, scratch);
    ASSERT_EQ(report.exit_code(), 0) << report.output;
    const std::string page = hnas::read_file(out.path / "report.html", "report");
    EXPECT_CONTAINS(page, "<td>kind=dnas</td><td>2</td>");
    ASSERT_NE(page.find("lnas and dnas tie"), std::string::npos);
    EXPECT_CONTAINS(page, "(<code>predictions/tie.md</code>, committed in <code>" + commit.substr(0, 7) + "</code>)");
    EXPECT_LT(page.find("lnas and dnas tie"), page.find("<h2>Results</h2>"));
    EXPECT_LT(page.find("<h2>Results</h2>"), page.find("<h2>Settings</h2>"));
    auto other = sweep_args(out.path.string(), 1);
    other[4] = "model.attention.encoder.kind=[hnas]";
    const testing::Outcome refused = testing::run_hnas(other, scratch);
    EXPECT_EQ(refused.exit_code(), 1);
    EXPECT_CONTAINS(refused.output, "holds another sweep (its settings differ");

    // hnas test on a trial whose metrics.jsonl a kill cut short skips the partial last line; a progress
    // record whose step is no integer, or that lacks a key, is an error naming the log and the line.
    const fs::path trial = out.path / "kind=lnas" / "seed-1";
    const std::string log_path = (trial / "metrics.jsonl").string(), log_text = hnas::read_file(log_path, "metrics log");
    const std::string where = "test: metrics log " + log_path + ":" +
                              std::to_string(std::count(log_text.begin(), log_text.end(), '\n') + 1) + ":";
    const Json training = read_run_result(trial)->at("training");
    testing::write_file(log_path, log_text + R"({"step": 25, "lo)");
    EXPECT_EQ(test_run(trial).at("training"), training);
    testing::write_file(log_path, log_text + R"({"step": 1e300, "loss": 1.0, "input_tokens_per_second": 9.0})" "\n");
    EXPECT_CONTAINS(testing::error_of([&] { test_run(trial); }),
                    where + " step must be an integer in [0, 9223372036854775807], got 1e+300");
    testing::write_file(log_path, log_text + R"({"step": 25, "loss": 1.0})" "\n");
    EXPECT_CONTAINS(testing::error_of([&] { test_run(trial); }),
                    where + " a progress record (with \"loss\") has no \"input_tokens_per_second\"");
}

// The sweep reads how far each trial got from its metrics.jsonl: a progress record whose step is no
// integer stops it before any trial starts, naming the log and the line.
TEST(Sweep, AStepThatIsNoIntegerInATrialsLogIsRefused) {
    const SweepEnvironment& environment = SweepEnvironment::get();
    const testing::RunDir out(environment.scratch, "bad_step");
    const fs::path trial = out.path / "lnas" / "seed-1";
    fs::create_directories(trial);
    const std::string log_path = (trial / "metrics.jsonl").string();
    testing::write_file(log_path, R"({"step": 1, "loss": 2.0})" "\n" R"({"step": 1e300, "loss": 1.0})" "\n");
    SweepOptions options;
    options.config = environment.config;
    options.settings = {Setting{"lnas", {Override{"model.attention.encoder.kind", "lnas"}}}};
    options.seeds = 1;
    options.out = out.path.string();
    options.executable = "/bin/false";  // never started: the log is read before any trial
    const auto world = distributed::single_process();
    EXPECT_CONTAINS(testing::error_of([&] { run_sweep(options, *world); }),
                    "sweep: metrics log " + log_path + ":2: step must be an integer in [0, 9223372036854775807], got 1e+300");
}

TEST(Sweep, SigtermStopsTheTrialsAtACheckpointAndARerunContinues) {
    const auto& scratch = SweepEnvironment::get().scratch;
    const testing::RunDir out(scratch, "sigterm");
    std::vector<std::string> command{HNAS_EXECUTABLE};
    for (const std::string& arg : sweep_args(out.path.string(), 1)) command.push_back(arg);
    const testing::Subprocess first = testing::start_subprocess(command, scratch.path("sigterm.log"));
    const fs::path trial = out.path / "kind=lnas" / "seed-1";
    const bool started = testing::wait_until([&] { return logged_steps(trial).size() >= 6; });
    kill(first.pid, SIGTERM);
    const int status = testing::finish(first);
    ASSERT_TRUE(started) << first.output();
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 128 + SIGTERM) << testing::describe_status(status) << "\n"
                                                                            << first.output();
    EXPECT_CONTAINS(first.output(), "stopping 1 running trials");
    if (!fs::exists(trial / kResultFile)) {  // stopped while training: at a checkpoint of the step it reached
        EXPECT_FALSE(train::RunDirectory(trial).step_checkpoints().empty());
    }
    const testing::Outcome rerun = testing::run_hnas(sweep_args(out.path.string(), 1), scratch);
    ASSERT_EQ(rerun.exit_code(), 0) << rerun.output;
    expect_sweep_complete(out.path);
}

// scripts/sweep_records.py keeps a sweep's finished trials without checkpoints and puts them back on
// another machine, where the sweep trains only the trials that had not finished.
TEST(Sweep, KeptRecordsResumeWithOnlyTheUnfinishedTrialsTrained) {
    const auto& scratch = SweepEnvironment::get().scratch;
    const testing::RunDir out(scratch, "kept");
    const testing::Outcome first = testing::run_hnas(sweep_args(out.path.string(), 1), scratch);
    ASSERT_EQ(first.exit_code(), 0) << first.output;
    const fs::path unfinished = out.path / "kind=dnas" / "seed-2";
    fs::remove(unfinished / kResultFile);  // as if the machine had stopped while it trained
    const std::string records = scratch.path("kept_records");
    const auto run_script = [&](const char* action) {
        const testing::Subprocess process = testing::start_subprocess(
            {"/usr/bin/python3", std::string(HNAS_SOURCE_DIR) + "/scripts/sweep_records.py", action, out.path.string(),
             "--records", records},
            scratch.path(std::string("kept_") + action + ".log"));
        const int status = testing::finish(process);
        EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << testing::describe_status(status) << "\n"
                                                                   << process.output();
        return process.output();
    };
    EXPECT_CONTAINS(run_script("keep"), "keep: 3 finished trials");
    EXPECT_TRUE(fs::exists(fs::path(records) / "sweep.json"));
    EXPECT_FALSE(fs::exists(fs::path(records) / "kind=dnas" / "seed-2")) << "an unfinished trial was kept";
    for (const auto& entry : fs::recursive_directory_iterator(records)) {
        EXPECT_NE(entry.path().extension(), ".ckpt") << entry.path();
    }

    fs::remove_all(out.path);  // the next machine has only the records
    EXPECT_CONTAINS(run_script("restore"), "restore: 3 finished trials");
    const testing::Outcome rerun = testing::run_hnas(sweep_args(out.path.string(), 1), scratch);
    ASSERT_EQ(rerun.exit_code(), 0) << rerun.output;
    EXPECT_CONTAINS(rerun.output, "1 to run here");
    EXPECT_CONTAINS(rerun.output, "training kind=dnas/seed-2");
    expect_sweep_complete(out.path);
}

TEST(Sweep, RefusesMoreTrialsAtOnceThanCores) {
    const auto& scratch = SweepEnvironment::get().scratch;
    const testing::RunDir out(scratch, "oversubscribed");
    const int cores = distributed::threads_per_rank(0, 1);
    const testing::Outcome outcome = testing::run_hnas(sweep_args(out.path.string(), cores + 1), scratch);
    EXPECT_EQ(outcome.exit_code(), 1);
    EXPECT_CONTAINS(outcome.output, "the cores would be oversubscribed");
    EXPECT_FALSE(fs::exists(out.path)) << "a refused sweep wrote its folder";
    // A setting whose config does not parse is named before anything is written.
    auto args = sweep_args(out.path.string(), 1);
    args[4] = "model.attention.encoder.knd=[lnas]";
    const testing::Outcome bad = testing::run_hnas(args, scratch);
    EXPECT_EQ(bad.exit_code(), 1);
    EXPECT_CONTAINS(bad.output, "sweep: setting knd=lnas, seed 1:");
    EXPECT_CONTAINS(bad.output, "knd");
    EXPECT_FALSE(fs::exists(out.path)) << "a refused sweep wrote its folder";
}

#ifdef HNAS_MPIEXEC
TEST(Sweep, MpiRanksShareTheTrialsWithoutOverlap) {
    const auto& scratch = SweepEnvironment::get().scratch;
    const testing::RunDir out(scratch, "mpi");
    std::vector<std::string> command{HNAS_MPIEXEC, "--oversubscribe", "-np", "2", "--mca", "btl", "self,tcp", "--mca",
                                     "btl_tcp_if_include", "lo", "--mca", "oob_tcp_if_include", "lo", HNAS_EXECUTABLE};
    for (const std::string& arg : sweep_args(out.path.string(), 1)) command.push_back(arg);
    const testing::Subprocess sweep = testing::start_subprocess(command, scratch.path("mpi.log"), testing::mpirun_environment());
    const int status = testing::finish(sweep, 600);
    ASSERT_EQ(status, 0) << testing::describe_status(status) << "\n" << sweep.output();
    expect_sweep_complete(out.path);
    // Trial i ran on rank i mod 2, and only there.
    int index = 0;
    for (const char* setting : {"kind=lnas", "kind=dnas"}) {
        for (const char* seed : {"seed-1", "seed-2"}) {
            const Json trial = Json::parse(hnas::read_file(out.path / setting / (std::string(seed) + ".trial.json"), "trial record"));
            EXPECT_EQ(trial.at("rank"), index++ % 2) << setting << "/" << seed;
        }
    }
}
#endif  // HNAS_MPIEXEC

}  // namespace
}  // namespace hnas::experiments
