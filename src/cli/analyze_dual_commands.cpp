// `hnas analyze dual` and `hnas analyze dual-example`: paper 003's exact dual solution against the
// approximation attention makes (§8 Fig. 4 on a trained model; Fig. 3 on a 2-D toy), as a table on
// the terminal, a JSON file and an SVG figure.
#include <spdlog/spdlog.h>

#include <memory>

#include "analysis/dual_deviation.h"
#include "base/atomic_file.h"
#include "base/number_format.h"
#include "base/read_file.h"
#include "cli/commands.h"
#include "command_line/validators.h"
#include "experiments/svg_chart.h"

namespace hnas::cli {

namespace {

// Fig. 4's form: per attention, the share of queries at each deviation (averaged over the heads),
// its mean marked by a vertical line.
std::string deviation_figure(const analysis::DualDeviationReport& report) {
    experiments::Chart chart{"Relative deviation ‖λ* − αz‖ / ‖λ*‖ per query, mean over heads (paper 003 Fig. 4)",
                             "relative deviation", "share of queries", {}, false, {}};
    const double width = report.options.histogram_top / report.options.bins;
    for (size_t a = 0; a < report.attentions.size(); ++a) {
        const analysis::AttentionDeviation& attention = report.attentions[a];
        int64_t total = attention.above_range;
        for (int64_t count : attention.histogram) total += count;
        experiments::Series shares{attention.name, experiments::series_color(a), 2.0, 1.0, {}};
        double top = 0.0;
        for (size_t bin = 0; bin < attention.histogram.size(); ++bin) {
            const double share = total ? static_cast<double>(attention.histogram[bin]) / static_cast<double>(total) : 0.0;
            shares.points.emplace_back((static_cast<double>(bin) + 0.5) * width, share);
            top = std::max(top, share);
        }
        chart.series.push_back(std::move(shares));
        chart.series.push_back({"", experiments::series_color(a), 1.0, 0.8, {{attention.mean, 0.0}, {attention.mean, top}}});
    }
    return experiments::svg_line_chart(chart);
}

// Fig. 3's form: the templates, μ and the evidence z from μ, and for each α the exact ĥ and Eq. 18's.
std::string example_figure(const analysis::DualExample& example) {
    experiments::Chart chart{"Exact ĥ (Eq. 12, λ*) and Eq. 18's (λ = αz) for a 2-D discrete u (paper 003 Fig. 3)", "a₁", "a₂",
                             {}, true, {}};
    for (size_t i = 0; 2 * i < example.templates.size(); ++i) {
        chart.series.push_back({i == 0 ? "templates (their u in the table)" : "", "#7f7f7f", 1.0, 1.0,
                                {{example.templates[2 * i], example.templates[2 * i + 1]}}});
    }
    chart.series.push_back({"μ → μ + z", "#1f3a93", 2.0, 1.0,
                            {{example.mean[0], example.mean[1]},
                             {example.mean[0] + example.evidence[0], example.mean[1] + example.evidence[1]}}});
    for (size_t c = 0; c < example.cases.size(); ++c) {
        const analysis::DualExampleCase& k = example.cases[c];
        chart.series.push_back({fmt::format("α {}: exact ĥ → Eq. 18's ĥ", portable(k.alpha)), experiments::series_color(c + 2), 1.5,
                                1.0, {{k.exact[0], k.exact[1]}, {k.approximate[0], k.approximate[1]}}});
    }
    return experiments::svg_line_chart(chart);
}

void add_dual_command(CLI::App& analyze) {
    struct Options {
        std::string checkpoint, data, output;
        analysis::DualDeviationOptions analysis;
    };
    auto options = std::make_shared<Options>();
    auto* command = analyze.add_subcommand(
        "dual", "Per layer and head of the encoder's lnas attentions: λ* of paper 003's dual (Eq. 9) against attention's αz");
    command->add_option("--checkpoint", options->checkpoint, "A checkpoint of hnas train or hnas import-bert")
        ->required()
        ->check(CLI::ExistingFile);
    command->add_option("--data", options->data, "Texts, one per line (articles for headline models)")->required()->check(CLI::ExistingFile);
    command->add_option("--max-sequences", options->analysis.max_sequences, "Texts used (0: all)")
        ->check(command_line::non_negative_integer<int64_t>());
    command->add_option("--batch", options->analysis.batch, "Texts per forward pass")->check(command_line::positive_integer<int64_t>());
    command->add_option("--output", options->output, "JSON report; the figure beside it as .svg (default: CHECKPOINT.dual.json)");
    command->callback([options] {
        const auto trained = tasks::load_trained_model(options->checkpoint);
        const auto report = analysis::dual_deviation(trained, read_lines(options->data, "data"), options->analysis);
        HNAS_CHECK(!report.attentions.empty(), "analyze dual: ", options->checkpoint, " has no encoder attention of kind lnas (",
                   fmt::format("{}", fmt::join(report.skipped, ", ")), "), whose weights have Eq. 18's form");
        if (options->output.empty()) options->output = options->checkpoint + ".dual.json";
        Json json = {{"checkpoint", trained.path}, {"step", trained.step}};
        json.update(analysis::to_json(report));
        write_file_atomically(options->output, json.dump(2) + "\n");
        const std::string figure = options->output + ".svg";
        write_file_atomically(figure, deviation_figure(report) + "\n");
        fmt::print("relative deviation ‖λ* − αz‖ / ‖λ*‖ over the real queries of {} sequences (step {})\n", report.sequences,
                   trained.step);
        fmt::print("{:<32} {:>4} {:>8} {:>9} {:>9} {:>9} {:>9} {:>10}\n", "attention", "head", "queries", "mean", "median", "p90",
                   "max", "Newton/q");
        for (const auto& attention : report.attentions) {
            for (size_t h = 0; h < attention.heads.size(); ++h) {
                const auto& d = attention.heads[h];
                fmt::print("{:<32} {:>4} {:>8} {:>9.4f} {:>9.4f} {:>9.4f} {:>9.4f} {:>10.1f}{}\n", attention.name, h, d.queries,
                           portable(d.mean), portable(d.median), portable(d.p90), portable(d.max), portable(d.mean_iterations),
                           d.unconverged ? fmt::format("  ({} unconverged)", d.unconverged) : "");
            }
            fmt::print("{:<32} {:>4} {:>8} {:>9.4f}  (mean over heads, Fig. 4's red line)\n", attention.name, "all", "",
                       portable(attention.mean));
        }
        for (const std::string& skipped : report.skipped) fmt::print("skipped, not Eq. 18's form: {}\n", skipped);
        spdlog::info("wrote {} and {}", options->output, figure);
    });
}

void add_dual_example_command(CLI::App& analyze) {
    auto output = std::make_shared<std::string>("dual_example.json");
    auto* command = analyze.add_subcommand(
        "dual-example", "Paper 003 Fig. 3: the exact ĥ against Eq. 18's for a 2-D discrete u at α 0.1, 0.5, 1 and 2");
    command->add_option("--output", *output, "JSON report; the figure beside it as .svg");
    command->callback([output] {
        const analysis::DualExample example = analysis::dual_example({0.1, 0.5, 1.0, 2.0});
        write_file_atomically(*output, analysis::to_json(example).dump(2) + "\n");
        write_file_atomically(*output + ".svg", example_figure(example) + "\n");
        fmt::print("u: templates");
        for (size_t i = 0; 2 * i < example.templates.size(); ++i) {
            fmt::print(" ({}, {}) {}", portable(example.templates[2 * i]), portable(example.templates[2 * i + 1]),
                       portable(example.weights[i]));
        }
        fmt::print("; μ ({:.3f}, {:.3f}); z ({}, {})\n", portable(example.mean[0]), portable(example.mean[1]),
                   portable(example.evidence[0]), portable(example.evidence[1]));
        fmt::print("{:>6} {:>20} {:>20} {:>20} {:>10}\n", "α", "λ*", "exact ĥ", "Eq. 18 ĥ", "distance");
        for (const auto& c : example.cases) {
            const auto pair = [](const analysis::Vector& v) { return fmt::format("({:.4f}, {:.4f})", portable(v[0]), portable(v[1])); };
            fmt::print("{:>6} {:>20} {:>20} {:>20} {:>10.4f}\n", portable(c.alpha), pair(c.lambda), pair(c.exact), pair(c.approximate),
                       portable(c.distance));
        }
        spdlog::info("wrote {} and {}.svg", *output, *output);
    });
}

}  // namespace

void add_dual_commands(CLI::App& analyze) {
    add_dual_command(analyze);
    add_dual_example_command(analyze);
}

}  // namespace hnas::cli
