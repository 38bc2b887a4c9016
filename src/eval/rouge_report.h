// ROUGE as hnas's commands score and show it: the options they take, the report as JSON (values in
// 0-1) and as a table (values in %).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "base/json.h"
#include "eval/rouge.h"

namespace hnas::eval {

struct RougeOptions {
    bool stem = false;     // ROUGE-1.5.5 -m: WordNet's exceptions, then Porter
    std::string wordnet;   // the folder of WordNet 2.0's exception lists, when stemming
    int bootstrap = 0;     // resamples for 95 % confidence intervals; 0: none
    uint64_t seed = 1;     // of the resampling
};

// The options as hnas eval hands them to a task through JSON, and back.
Json options_json(const RougeOptions& options);
RougeOptions rouge_options(const Json& json);

RougeReport score_rouge(const std::vector<std::string>& hypotheses, const std::vector<std::string>& references,
                        const RougeOptions& options);

// {"rouge-1": {"precision", "recall", "f1"[, "f1_ci95"]}, ..., "pairs"} with values in 0-1.
Json rouge_json(const RougeReport& report);

// The table `hnas rouge` and `hnas eval` print: precision, recall and F1 in % per ROUGE-N/L, with the
// F1's 95 % interval when bootstrapped.
std::string rouge_table(const RougeReport& report, bool stemmed);

}  // namespace hnas::eval
