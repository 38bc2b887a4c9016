// `hnas analyze explain-away` and `hnas analyze hybrid`: the papers' attention analyses of a trained
// model, as a table on the terminal and a JSON file that scripts/plot_analysis.py turns into a PNG.
#include <spdlog/spdlog.h>

#include <filesystem>
#include <memory>

#include "analysis/explain_away.h"
#include "analysis/hybrid_weights.h"
#include "base/atomic_file.h"
#include "base/number_format.h"
#include "base/read_file.h"
#include "cli/commands.h"
#include "command_line/validators.h"
#include "eval/rouge.h"
#include "io/checkpoint.h"

namespace hnas::cli {

namespace {

void add_explain_away_command(CLI::App& analyze) {
    struct Options {
        std::string checkpoint, input, output;
        analysis::ExplainAwayOptions analysis;
    };
    auto options = std::make_shared<Options>();
    auto* command = analyze.add_subcommand(
        "explain-away", "Per layer and head, the distribution of per-key attention weight sums of the encoder");
    command->add_option("--checkpoint", options->checkpoint, "A checkpoint of hnas train")->required()->check(CLI::ExistingFile);
    command->add_option("--input", options->input, "Texts, one per line (articles for headline models)")
        ->required()
        ->check(CLI::ExistingFile);
    command->add_option("--epsilon", options->analysis.epsilon, "Keys with total weight below this are explained away")
        ->check(command_line::positive_number<double>());
    command->add_option("--max-sequences", options->analysis.max_sequences, "Texts used (0: all)")
        ->check(command_line::non_negative_integer<int64_t>());
    command->add_option("--batch", options->analysis.batch, "Texts per forward pass")->check(command_line::positive_integer<int64_t>());
    command->add_option("--groups", options->analysis.groups, "Pieces and positions listed per head among its explained-away keys")
        ->check(command_line::positive_integer<int64_t>());
    command->add_option("--output", options->output, "JSON report (default: CHECKPOINT.explain_away.json)");
    command->callback([options] {
        const auto trained = tasks::load_trained_model(options->checkpoint);
        const auto report = analysis::explain_away(trained, read_lines(options->input, "input"), options->analysis);
        if (options->output.empty()) options->output = options->checkpoint + ".explain_away.json";
        Json json = {{"checkpoint", trained.path}, {"step", trained.step}};
        json.update(analysis::to_json(report));
        // Pieces come from the vocabulary file: a byte that is no UTF-8 is written as U+FFFD, not an exception.
        write_file_atomically(options->output, json.dump(2, ' ', false, Json::error_handler_t::replace) + "\n");
        fmt::print("per-key weight sums Σ_i A_ij over {} sequences (step {}); explained away: below {:g}\n",
                   report.sequences, trained.step, portable(options->analysis.epsilon));
        fmt::print("{:<28} {:<12} {:>4} {:>9} {:>12} {:>12} {:>12} {:>12}\n", "attention", "kind", "head", "keys",
                   "% below eps", "median sum", "min sum", "min sum * L");
        for (const auto& attention : report.attentions) {
            for (size_t h = 0; h < attention.heads.size(); ++h) {
                const auto& head = attention.heads[h];
                const double below =
                    head.keys ? 100.0 * static_cast<double>(head.below_epsilon) / static_cast<double>(head.keys) : 0.0;
                fmt::print("{:<28} {:<12} {:>4} {:>9} {:>12.3f} {:>12.4g} {:>12.4g} {:>12.4g}\n", attention.name,
                           attention.kind, h, head.keys, portable(below), portable(head.median_sum), portable(head.min_sum),
                           portable(head.min_ratio));
            }
        }
        for (const auto& attention : report.attentions) {
            if (attention.heads.empty() || attention.heads.front().keys == 0) continue;
            fmt::print("{}: {} of {} keys below {:g} in every head\n", attention.name, attention.below_epsilon_in_every_head,
                       attention.heads.front().keys, portable(options->analysis.epsilon));
        }
        const auto listed = [](const std::vector<analysis::KeyGroup>& groups, const char* open, const char* close) {
            std::string text;
            for (const auto& group : groups) {
                text += fmt::format("{}{}{}{} {} of {}", text.empty() ? "" : ", ", open, group.label, close, group.below_epsilon,
                                    group.occurrences);
            }
            return text;
        };
        for (const auto& attention : report.attentions) {
            for (size_t h = 0; h < attention.heads.size(); ++h) {
                const auto& head = attention.heads[h];
                if (head.pieces_below_epsilon.empty()) continue;
                fmt::print("{} head {}: {} keys below {:g}; pieces {}; positions {}\n", attention.name, h, head.below_epsilon,
                           portable(options->analysis.epsilon), listed(head.pieces_below_epsilon, "'", "'"),
                           listed(head.positions_below_epsilon, "#", ""));
            }
        }
        spdlog::info("wrote {}; plot: /usr/bin/python3 scripts/plot_analysis.py explain-away {} --out {}.png",
                     options->output, options->output, options->output);
    });
}

void add_hybrid_command(CLI::App& analyze) {
    struct Options {
        std::string run, checkpoint, output;
    };
    auto options = std::make_shared<Options>();
    auto* command = analyze.add_subcommand("hybrid", "The hybrid weights u per layer and head, over training or at a checkpoint");
    auto* run = command->add_option("--run", options->run, "A run directory of hnas train (u over training)")
                    ->check(CLI::ExistingDirectory);
    auto* checkpoint = command->add_option("--checkpoint", options->checkpoint, "A checkpoint (u at that step)")
                           ->check(CLI::ExistingFile);
    run->excludes(checkpoint);
    command->add_option("--output", options->output, "JSON report (default: RUN/hybrid_weights.json or CHECKPOINT.hybrid.json)");
    command->callback([options] {
        HNAS_CHECK(!options->run.empty() || !options->checkpoint.empty(), "analyze hybrid: give --run DIR or --checkpoint FILE");
        std::vector<analysis::HybridWeights> points;
        std::string source;
        if (!options->run.empty()) {
            points = analysis::hybrid_weights_of_run(options->run);
            source = options->run;
            if (options->output.empty()) options->output = (std::filesystem::path(options->run) / "hybrid_weights.json").string();
        } else {
            points = {analysis::hybrid_weights_of_model(tasks::load_trained_model(options->checkpoint))};
            source = options->checkpoint;
            if (options->output.empty()) options->output = options->checkpoint + ".hybrid.json";
        }
        write_file_atomically(options->output, analysis::to_json(source, points).dump(2) + "\n");
        const auto& first = points.front();
        const auto& last = points.back();
        fmt::print("hybrid weights u (u = 1: DNAS, u = 0: LNAS) at step {}{}\n", last.step,
                   points.size() > 1 ? fmt::format(" (and at step {})", first.step) : "");
        for (size_t a = 0; a < last.attentions.size(); ++a) {
            fmt::print("  {:<32}", last.attentions[a].first);
            for (size_t h = 0; h < last.attentions[a].second.size(); ++h) {
                if (points.size() > 1 && a < first.attentions.size() && h < first.attentions[a].second.size()) {
                    fmt::print("  {:.3f} -> {:.3f}", portable(first.attentions[a].second[h]),
                               portable(last.attentions[a].second[h]));
                } else {
                    fmt::print("  {:.3f}", portable(last.attentions[a].second[h]));
                }
            }
            fmt::print("\n");
        }
        spdlog::info("wrote {} ({} points); plot: /usr/bin/python3 scripts/plot_analysis.py hybrid {} --out {}.png",
                     options->output, points.size(), options->output, options->output);
    });
}

}  // namespace

void add_analyze_command(CLI::App& app) {
    auto* analyze = app.add_subcommand("analyze", "The papers' attention analyses of a trained model (JSON + table)");
    analyze->require_subcommand(1);
    add_explain_away_command(*analyze);
    add_hybrid_command(*analyze);
    add_dual_commands(*analyze);
}

}  // namespace hnas::cli
