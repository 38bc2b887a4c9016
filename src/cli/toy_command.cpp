// `hnas toy mode-collapse` and `hnas toy centre-distance`: the mode-collapse analyses of paper 000
// Sec. 5.2 (Eq. 11-12, Figs. 2, 5, 6) and paper 004 Appendix E (src/analysis/mode_collapse.h);
// `hnas toy pooling-scale`: paper 002 Fig. 1 (src/analysis/pooling_scale.h).
// Each prints a table and, with --output, writes JSON for scripts/plot_analysis.py.
#include <spdlog/spdlog.h>

#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "analysis/mode_collapse.h"
#include "analysis/pooling_scale.h"
#include "base/atomic_file.h"
#include "base/check.h"
#include "base/number_format.h"
#include "cli/commands.h"
#include "command_line/validators.h"
#include "io/checkpoint.h"

namespace hnas::cli {

namespace {

void write_json(const nlohmann::json& json, const std::string& path) {
    write_file_atomically(path, json.dump(1) + "\n");
    spdlog::info("wrote {}", path);
}

std::string join_sizes(const std::vector<size_t>& sizes) {
    std::string text;
    for (const size_t size : sizes) {
        if (!text.empty()) text += '+';
        text += std::to_string(size);
    }
    return text.empty() ? "-" : text;
}

void add_mode_collapse_command(CLI::App& toy) {
    struct Options {
        analysis::ModeCollapseOptions analysis;
        std::vector<analysis::ToyKind> kinds{analysis::ToyKind::lnas, analysis::ToyKind::dnas};
        std::string output;
    };
    auto options = std::make_shared<Options>();
    auto& defaults = options->analysis;
    auto* command = toy.add_subcommand(
        "mode-collapse", "Two 2-D Gaussian clusters under repeated self-attention without projections (paper 004 Fig. 6)");
    command->add_option("--n0", defaults.n0, "Points around (1.8, 0.7)")->check(command_line::positive_integer<int>())->capture_default_str();
    command->add_option("--n1", defaults.n1, "Points around (-1, -1)")->check(command_line::positive_integer<int>())->capture_default_str();
    command->add_option("--steps", defaults.steps, "Attention steps")->check(command_line::non_negative_integer<int>())->capture_default_str();
    command->add_option("--seed", defaults.seed, "Seed of the sampled points")
        ->check(command_line::non_negative_integer<uint64_t>())
        ->capture_default_str();
    command->add_option("--spread", defaults.spread, "Standard deviation of each cluster, per coordinate")
        ->check(command_line::non_negative_number<double>())
        ->capture_default_str();
    command->add_option("--scale", defaults.score_scale, "Factor on the dot products before exp (1: the papers' Eq. 3, 7)")
        ->check(command_line::positive_number<double>())
        ->capture_default_str();
    command->add_option("--kinds", options->kinds, "Normalizations to run (lnas,dnas by default), computed in double precision")
        ->delimiter(',')
        ->transform(command_line::enum_choices<analysis::ToyKind>());
    command->add_option("--hybrid-u", defaults.hybrid_u, "hnas: weight u of DNAS")
        ->check(command_line::number_in<double>(0, 1))
        ->capture_default_str();
    command->add_option("--merge-fraction", defaults.merge_fraction,
                        "Points closer than this fraction of the centres' distance (3.28) share a cluster")
        ->check(command_line::positive_number<double>())
        ->capture_default_str();
    command->add_option("--min-cluster-fraction", defaults.min_cluster_fraction,
                        "Smaller groups than this fraction of min(n0, n1) count as stray points, not clusters")
        ->check(command_line::number_in<double>(0, 1))
        ->capture_default_str();
    command->add_flag("--residual", defaults.residual, "Each step adds its input back: x + attention(x) (paper 004 App. E)");
    command->add_option("--output", options->output, "Write the result (points of every step included) as JSON");
    command->callback([options] {
        options->analysis.kinds = options->kinds;
        const auto result = analysis::run_mode_collapse(options->analysis);
        const auto& o = result.options;
        fmt::print("mode collapse: {} vs {} points, spread {:g}, score scale {:g}, seed {}{}; clusters: single linkage "
                   "at {:.3f}, at least {} points\n",
                   o.n0, o.n1, portable(o.spread), portable(o.score_scale), o.seed, o.residual ? ", residual" : "",
                   portable(result.merge_distance),
                   result.min_cluster_points);
        fmt::print("{:<6} {:>5} {:>9} {:<16} {:>6} {:>16}\n", "kind", "step", "clusters", "sizes", "stray", "centre distance");
        for (const auto& run : result.runs) {
            for (const auto& step : run.steps) {
                fmt::print("{:<6} {:>5} {:>9} {:<16} {:>6} {:>16.4f}\n", name_of(run.normalization.kind),
                           step.step, step.clustering.clusters(), join_sizes(step.clustering.cluster_sizes),
                           step.clustering.stray_points, portable(step.centre_distance));
            }
        }
        if (!options->output.empty()) write_json(nlohmann::json(result), options->output);
    });
}

void add_centre_distance_command(CLI::App& toy) {
    struct Options {
        analysis::CentreDistanceOptions analysis;
        std::string output;
    };
    auto options = std::make_shared<Options>();
    auto& defaults = options->analysis;
    auto* command = toy.add_subcommand(
        "centre-distance", "Paper 000 Eq. 11-12: centre distance after one step vs r = N0/N1, with a 1-D simulation");
    command->add_option("--a", defaults.a_values, "Half the initial distance between the clusters (at +a and -a)")
        ->check(command_line::positive_number<double>())
        ->capture_default_str();
    command->add_option("--r-min", defaults.r_min, "Smallest r = N0/N1")->check(command_line::positive_number<double>())->capture_default_str();
    command->add_option("--r-max", defaults.r_max, "Largest r = N0/N1")->check(command_line::positive_number<double>())->capture_default_str();
    command->add_option("--curve-points", defaults.curve_points, "Values of r on each analytic curve")
        ->check(command_line::integer_in<int>(2))
        ->capture_default_str();
    command->add_option("--simulated-points", defaults.simulated_points, "Values of r simulated")
        ->check(command_line::positive_integer<int>())
        ->capture_default_str();
    command->add_option("--simulation-base", defaults.simulation_base, "Size of the smaller cluster in the simulations")
        ->check(command_line::positive_integer<int>())
        ->capture_default_str();
    command->add_option("--output", options->output, "Write the curves and simulated points as JSON");
    command->callback([options] {
        const auto result = analysis::centre_distance_analysis(options->analysis);
        fmt::print("centre distance after one step, N0 points at +a and N1 at -a (initial distance 2a)\n");
        fmt::print("{:>6} {:>9} {:>6} {:>6} {:>10} {:>12} {:>10} {:>12}\n", "a", "r", "N0", "N1", "Eq. 11", "lnas (sim)",
                   "Eq. 12", "dnas (sim)");
        for (const auto& curve : result.curves) {
            for (const auto& point : curve.simulated) {
                fmt::print("{:>6.3f} {:>9.4f} {:>6} {:>6} {:>10.6f} {:>12.6f} {:>10.6f} {:>12.6f}\n", portable(curve.a),
                           portable(point.r), point.n0, point.n1, portable(point.lnas_analytic), portable(point.lnas),
                           portable(point.dnas_analytic), portable(point.dnas));
            }
        }
        fmt::print("largest |simulation - analytic|: {:.3g}\n", portable(result.max_abs_error));
        if (!options->output.empty()) write_json(nlohmann::json(result), options->output);
    });
}

void add_pooling_scale_command(CLI::App& toy) {
    struct Options {
        analysis::PoolingScaleOptions analysis;
        std::string output;
    };
    auto options = std::make_shared<Options>();
    auto& defaults = options->analysis;
    auto* command = toy.add_subcommand(
        "pooling-scale", "Paper 002 Fig. 1: the output's standard deviation and norm against the sequence length, at random "
                         "weights, for every attention kind and the poolings");
    command->add_option("--lengths", defaults.lengths, "Sequence lengths N (each must divide --vectors)")
        ->delimiter(',')
        ->check(command_line::positive_integer<int64_t>());
    command->add_option("--vectors", defaults.vectors, "Query, key and value vectors per length")
        ->check(command_line::positive_integer<int64_t>())
        ->capture_default_str();
    command->add_option("--width", defaults.width, "Their dimension d_h")->check(command_line::positive_integer<int64_t>())->capture_default_str();
    command->add_option("--seed", defaults.seed, "Seed of the samples")->check(command_line::non_negative_integer<uint64_t>())->capture_default_str();
    command->add_option("--output", options->output, "Write every row and the slopes as JSON");
    command->callback([options] {
        const std::vector<analysis::PoolingScaleRow> rows = analysis::run_pooling_scale(options->analysis);
        const Json slopes = analysis::pooling_scale_slopes(rows);
        fmt::print("output standard deviation (mean norm) against N; {} vectors of width {} per N, seed {}\n{:<16}",
                   options->analysis.vectors, options->analysis.width, options->analysis.seed, "aggregator");
        for (const int64_t length : options->analysis.lengths) fmt::print(" {:>16}", length);
        fmt::print(" {:>8}\n", "slope");
        const size_t aggregators = rows.size() / options->analysis.lengths.size();  // each length lists them in one order
        for (size_t a = 0; a < aggregators; ++a) {
            const std::string& aggregator = rows[a].aggregator;
            fmt::print("{:<16}", aggregator);
            for (size_t r = a; r < rows.size(); r += aggregators) {
                fmt::print(" {:>7.4f} ({:>6.3f})", portable(rows[r].output_std), portable(rows[r].mean_norm));
            }
            fmt::print(" {:>8}\n", slopes.contains(aggregator) ? fmt::format("{:.3f}", portable(slopes.at(aggregator).get<double>())) : "–");
        }
        fmt::print("slope: least squares of ln(std) on ln N over N >= 16 (–: fewer than two such N)\n");
        if (options->output.empty()) return;
        Json json = {{"analysis", "pooling_scale"}, {"slopes", slopes}, {"rows", Json::array()}};
        for (const auto& row : rows) {
            json["rows"].push_back({{"aggregator", row.aggregator}, {"length", row.length}, {"output_std", row.output_std},
                                    {"mean_norm", row.mean_norm}});
        }
        write_json(json, options->output);
    });
}

}  // namespace

void add_toy_command(CLI::App& app) {
    auto* toy = app.add_subcommand("toy", "Toy analyses of attention normalization (mode collapse, Eq. 11-12, the output scale of paper 002 Fig. 1)");
    toy->require_subcommand(1);
    add_mode_collapse_command(*toy);
    add_centre_distance_command(*toy);
    add_pooling_scale_command(*toy);
}

}  // namespace hnas::cli
