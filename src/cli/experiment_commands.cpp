// `hnas sweep`, `hnas test`, `hnas compare` and `hnas report`: experiments over settings and seeds
// (docs/experiments/README.md).
#include <spdlog/spdlog.h>

#include <filesystem>
#include <iostream>
#include <memory>
#include <optional>

#include "analysis/attention_interventions.h"
#include "base/check.h"
#include "cli/commands.h"
#include "command_line/validators.h"
#include "distributed/communicator.h"
#include "base/atomic_file.h"
#include "experiments/compare.h"
#include "experiments/report.h"
#include "experiments/run_result.h"
#include "experiments/sweep.h"

namespace hnas::cli {

void add_sweep_command(CLI::App& app, int& exit_code) {
    struct Options {
        experiments::SweepOptions sweep;
        std::vector<std::string> grids;
        std::string list;
    };
    auto options = std::make_shared<Options>();
    auto* command = app.add_subcommand(
        "sweep", "Train and test a config over settings × seeds (OUT/<setting>/seed-<k>/ run directories), then compare them");
    auto& s = options->sweep;
    command->add_option("--config", s.config, "Base experiment config (JSON)")->required()->check(CLI::ExistingFile);
    command->add_option("--grid", options->grids, "key.path=[v1,v2,…]: one value per setting (repeatable; grids multiply)");
    command->add_option("--list", options->list,
                        "A JSON array of override objects or named settings, one setting each; with --grid, each of them "
                        "at every grid point")
        ->check(CLI::ExistingFile);
    command->add_option("--set", s.overrides, "Override a config value in every trial: key.path=value (repeatable)");
    command->add_option("--seeds", s.seeds, "Trials per setting, seeds --first-seed, --first-seed + 1, …")
        ->check(command_line::positive_integer<int64_t>());
    command->add_option("--first-seed", s.first_seed, "Seed of each setting's first trial")->check(command_line::non_negative_integer<int64_t>());
    command->add_option("--out", s.out, "The sweep's folder; rerunning into it continues the sweep")->required();
    command->add_option("--parallel", s.parallel, "Trials at once (per rank under mpirun); the cores are split between them")
        ->check(command_line::positive_integer<int>());
    command->add_option("--progress-every", s.progress_seconds, "Seconds between progress reports")
        ->check(command_line::positive_number<double>());
    command->add_option("--prediction", s.prediction_file,
                        "A markdown file committed to git (conventionally docs/experiments/predictions/NAME.md) saying what "
                        "the sweep is expected to show, stated before its first run: refused if untracked or changed since "
                        "its last commit; its text, path and that commit kept in sweep.json, shown first by hnas report, "
                        "never changed by a rerun")
        ->type_name("FILE");
    command->callback([options, &exit_code] {
        auto& o = *options;
        std::vector<experiments::GridAxis> axes;
        for (const std::string& grid : o.grids) axes.push_back(experiments::parse_grid_axis(grid));
        o.sweep.settings = o.list.empty() ? experiments::expand_grid(axes)
                                          : experiments::cross(experiments::read_setting_list(o.list), axes);
        o.sweep.executable = std::filesystem::read_symlink("/proc/self/exe").string();
        // Under mpirun the ranks share the trials out; each trial itself is one process.
        const auto world = distributed::connect(600.0);
        if (world->size() > 1) {
            spdlog::set_pattern(fmt::format("[%Y-%m-%d %H:%M:%S.%e] [%^%l%$] [rank {}] %v", world->rank()));
        }
        const experiments::SweepOutcome outcome = experiments::run_sweep(o.sweep, *world);
        if (outcome.signal != 0) {
            exit_code = 128 + outcome.signal;
            return;
        }
        HNAS_CHECK(outcome.failed == 0, "sweep: ", outcome.failed, " of the trials run here failed (their logs are beside them "
                   "in ", o.sweep.out, "); rerunning the command retries them");
    });
}

void add_test_command(CLI::App& app) {
    struct Options {
        std::string run, out;
        std::vector<std::string> overrides;
        analysis::Intervention intervention{};
        double epsilon = 1e-3;
    };
    auto options = std::make_shared<Options>();
    auto* command = app.add_subcommand(
        "test", "Score a finished run on its config's test data (section test) and write RUN_DIR/result.json");
    command->add_option("run", options->run, "The run directory")->required()->check(CLI::ExistingDirectory);
    command->add_option("--set", options->overrides, "Override a test setting: test.key=value (repeatable)");
    auto* intervention =
        command
            ->add_option("--intervention", options->intervention,
                         "A test-time change of every bidirectional attention's weights (docs/analyses.md, \"Interventions\"): "
                         "drop_explained_away (keys whose weight sum is below --epsilon), floor_key_sums (each key's sum "
                         "raised to 1/L), dnas_weights (the scores normalized by DNAS)")
            ->transform(command_line::enum_choices<analysis::Intervention>());
    command->add_option("--epsilon", options->epsilon, "drop_explained_away's threshold on a key's weight sum")
        ->check(command_line::positive_number<double>());
    intervention->needs(command->add_option(
        "--out", options->out, "The folder result.json goes to instead of the run's (required with --intervention)"));
    command->callback([options, intervention] {
        experiments::TestDestination destination{options->out, nullptr};
        std::optional<nn::AttentionIntervention> scope;
        if (intervention->count() > 0) {
            destination.intervention = {{"name", name_of(options->intervention)}, {"epsilon", options->epsilon}};
            scope.emplace(analysis::intervention_change(options->intervention, options->epsilon));
        }
        const Json result = experiments::test_run(options->run, options->overrides, destination);
        for (const auto& [name, value] : result.at("metrics").items()) fmt::print("{:<28} {}\n", name, value.dump());
        spdlog::info("wrote {}/{}", options->out.empty() ? options->run : options->out, experiments::kResultFile);
    });
}

void add_compare_command(CLI::App& app) {
    struct Options {
        std::vector<std::string> paths;
        std::string out;
        std::string family;
        int64_t bootstrap = 1000;
        uint64_t seed = 1;
    };
    auto options = std::make_shared<Options>();
    auto* command = app.add_subcommand(
        "compare", "Mean ± standard error per setting and paired tests between settings (each p raw and Holm-adjusted "
                   "within its family), over a sweep or run directories");
    command->add_option("paths", options->paths, "A sweep's folder, run directories, or folders holding them")
        ->required()
        ->check(CLI::ExistingDirectory);
    command->add_option("--out", options->out,
                        "The folder comparison.md and comparison.json go to, created if missing (default: the first path)");
    command->add_option("--bootstrap", options->bootstrap, "Resamples of the paired bootstrap over test examples")
        ->check(command_line::positive_integer<int64_t>());
    command->add_option("--seed", options->seed, "Seed of the resampling")->check(command_line::non_negative_integer<uint64_t>());
    command->add_option("--family", options->family,
                        "A JSON array of {\"a\", \"b\", \"metric\"}: the tests the findings rest on, named before their runs; Holm's "
                        "adjustment runs over these alone (default: over every test of the comparison)")
        ->check(CLI::ExistingFile);
    command->callback([options] {
        const auto comparison =
            experiments::compare(experiments::collect_results(options->paths), options->bootstrap, options->seed,
                                 options->family.empty() ? std::vector<experiments::FamilyTest>{}
                                                         : experiments::read_family(options->family));
        const std::string out = options->out.empty() ? options->paths.front() : options->out;
        experiments::write_comparison(comparison, out);
        std::cout << comparison.markdown;
        spdlog::info("wrote {}/comparison.md and comparison.json", out);
    });
}

void add_report_command(CLI::App& app) {
    struct Options {
        std::vector<std::string> paths;
        std::string out;
    };
    auto options = std::make_shared<Options>();
    auto* command = app.add_subcommand(
        "report", "One self-contained HTML page of a sweep or runs: settings, results, curves, hybrid weights");
    command->add_option("paths", options->paths, "A sweep's folder, run directories, or folders holding them")
        ->required()
        ->check(CLI::ExistingDirectory);
    command->add_option("--out", options->out, "The HTML file (default: report.html in the first path)");
    command->callback([options] {
        const std::string out = options->out.empty() ? options->paths.front() + "/report.html" : options->out;
        write_file_atomically(out, experiments::report_html(options->paths));
        spdlog::info("wrote {}", out);
    });
}

}  // namespace hnas::cli
