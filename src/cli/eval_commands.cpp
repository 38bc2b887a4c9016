// `hnas rouge`.
#include <cstdio>
#include <iostream>
#include <memory>
#include <nlohmann/json.hpp>

#include "cli/commands.h"
#include "eval/rouge.h"

namespace hnas::cli {

void add_rouge_command(CLI::App& app) {
    struct Options {
        std::string hypotheses, references, wordnet = std::string(HNAS_SOURCE_DIR) + "/data/wordnet";
        bool stem = false, json = false;
        int bootstrap = 0;
        uint64_t seed = 1;
    };
    auto options = std::make_shared<Options>();
    auto* command = app.add_subcommand("rouge", "ROUGE-1/2/L of line-aligned files, as ROUGE-1.5.5 -n 2 -a -f A -p 0.5");
    command->add_option("--hyp", options->hypotheses, "Hypotheses, one per line")->required()->check(CLI::ExistingFile);
    command->add_option("--ref", options->references, "References, one per line")->required()->check(CLI::ExistingFile);
    command->add_flag("--stem", options->stem, "Stem as ROUGE-1.5.5 -m (WordNet exceptions, then Porter)");
    command->add_option("--wordnet", options->wordnet, "Folder with the WordNet 2.0 exception lists");
    command->add_option("--bootstrap", options->bootstrap, "Resamples for 95 % confidence intervals (0: none)")
        ->check(CLI::NonNegativeNumber);
    command->add_option("--seed", options->seed, "Seed of the bootstrap resampling");
    command->add_flag("--json", options->json, "Print JSON (values in 0-1) instead of the table");
    command->callback([options] {
        const eval::RougeScorer scorer(options->stem, options->stem ? options->wordnet : "");
        const auto report = scorer.score(eval::read_lines(options->hypotheses),
                                         eval::read_lines(options->references), options->bootstrap, options->seed);
        const std::pair<const char*, const eval::RougeScore*> rows[] = {
            {"rouge-1", &report.rouge_1}, {"rouge-2", &report.rouge_2}, {"rouge-l", &report.rouge_l}};
        const eval::RougeIntervals* intervals[] = {&report.rouge_1_ci, &report.rouge_2_ci, &report.rouge_l_ci};
        if (options->json) {
            nlohmann::ordered_json out;
            for (size_t i = 0; i < 3; ++i) {
                auto& entry = out[rows[i].first];
                entry = {{"precision", rows[i].second->precision},
                         {"recall", rows[i].second->recall},
                         {"f1", rows[i].second->f1}};
                if (report.bootstrap_samples > 0) entry["f1_ci95"] = {intervals[i]->f1.low, intervals[i]->f1.high};
            }
            out["pairs"] = report.pairs;
            std::cout << out.dump(2) << "\n";
            return;
        }
        std::printf("ROUGE over %zu pairs%s (values in %%, 0-100)\n", report.pairs, options->stem ? ", stemmed" : "");
        std::printf("%-8s %9s %9s %9s%s\n", "", "precision", "recall", "F1", report.bootstrap_samples ? "   F1 95% CI" : "");
        for (size_t i = 0; i < 3; ++i) {
            std::printf("%-8s %9.2f %9.2f %9.2f", rows[i].first, 100 * rows[i].second->precision,
                        100 * rows[i].second->recall, 100 * rows[i].second->f1);
            if (report.bootstrap_samples) std::printf("   [%.2f, %.2f]", 100 * intervals[i]->f1.low, 100 * intervals[i]->f1.high);
            std::printf("\n");
        }
    });
}

}  // namespace hnas::cli
