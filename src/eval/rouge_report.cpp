#include "eval/rouge_report.h"

#include <fmt/format.h>

#include "base/number_format.h"

namespace hnas::eval {

namespace {

struct RougeRow {
    const char* name;
    const RougeScore& score;
    const RougeIntervals& intervals;
};

std::vector<RougeRow> rouge_rows(const RougeReport& report) {
    return {{"rouge-1", report.rouge_1, report.rouge_1_ci},
            {"rouge-2", report.rouge_2, report.rouge_2_ci},
            {"rouge-l", report.rouge_l, report.rouge_l_ci}};
}

}  // namespace

Json options_json(const RougeOptions& options) {
    return {{"stem", options.stem}, {"wordnet", options.wordnet}, {"bootstrap", options.bootstrap}, {"seed", options.seed}};
}

RougeOptions rouge_options(const Json& json) {
    RougeOptions options;
    options.stem = json.value("stem", options.stem);
    options.wordnet = json.value("wordnet", options.wordnet);
    options.bootstrap = json.value("bootstrap", options.bootstrap);
    options.seed = json.value("seed", options.seed);
    return options;
}

RougeReport score_rouge(const std::vector<std::string>& hypotheses, const std::vector<std::string>& references,
                        const RougeOptions& options) {
    const RougeScorer scorer(options.stem, options.stem ? options.wordnet : "");
    return scorer.score(hypotheses, references, options.bootstrap, options.seed);
}

Json rouge_json(const RougeReport& report) {
    Json out;
    for (const auto& row : rouge_rows(report)) {
        auto& entry = out[row.name];
        entry = {{"precision", row.score.precision}, {"recall", row.score.recall}, {"f1", row.score.f1}};
        if (report.bootstrap_samples > 0) entry["f1_ci95"] = {row.intervals.f1.low, row.intervals.f1.high};
    }
    out["pairs"] = report.pairs;
    return out;
}

std::string rouge_table(const RougeReport& report, bool stemmed) {
    std::string text = fmt::format("ROUGE over {} pairs{} (values in %, 0-100)\n", report.pairs, stemmed ? ", stemmed" : "");
    text += fmt::format("{:<8} {:>9} {:>9} {:>9}{}\n", "", "precision", "recall", "F1", report.bootstrap_samples ? "   F1 95% CI" : "");
    for (const auto& row : rouge_rows(report)) {
        text += fmt::format("{:<8} {:>9.2f} {:>9.2f} {:>9.2f}", row.name, portable(100 * row.score.precision),
                            portable(100 * row.score.recall), portable(100 * row.score.f1));
        if (report.bootstrap_samples) {
            text += fmt::format("   [{:.2f}, {:.2f}]", portable(100 * row.intervals.f1.low), portable(100 * row.intervals.f1.high));
        }
        text += "\n";
    }
    return text;
}

}  // namespace hnas::eval
