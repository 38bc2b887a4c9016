// The explaining-away statistic (paper 004, Sec. 3 and Fig. 1): for every real key j of a sequence,
// the total weight Σ_i A_ij its queries give it. Under softmax attention (LNAS) a key can be "explained
// away" (total weight near 0: no query uses it); doubly-normalized attention guarantees Σ_i A_ij ≥ 1/L
// for L real keys (paper 000, Lemma 1). Measured on the encoder self-attention of a trained model.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "decode/trained_model.h"

namespace hnas::analysis {

struct ExplainAwayOptions {
    double epsilon = 1e-3;        // a key whose total weight is below this is explained away
    int64_t max_sequences = 1000;  // texts read from the input (0: all)
    int64_t batch = 32;
    double histogram_low = -6.0, histogram_high = 2.0;  // log10 range of the histogram; outside values clamp
    int histogram_bins = 40;
};

struct HeadKeyWeights {
    int64_t keys = 0;                     // real keys seen
    int64_t below_epsilon = 0;
    double min_sum = 0;                   // smallest Σ_i A_ij over all keys
    double min_bound = 0;                 // 1/L of the sequence holding that key (Lemma 1's bound)
    double min_ratio = 0;                 // smallest Σ_i A_ij · L (≥ 1 under DNAS)
    double median_sum = 0;
    std::vector<int64_t> histogram;       // counts of log10 Σ_i A_ij per bin
};

struct AttentionKeyWeights {
    std::string name, kind;
    std::vector<HeadKeyWeights> heads;
};

struct ExplainAwayReport {
    ExplainAwayOptions options;
    int64_t sequences = 0;
    std::vector<AttentionKeyWeights> attentions;
};

// Runs the model's encoder over `texts` (articles for a headline model, sentences for a masked-LM
// model, cut to the model's positions) and gathers the per-key weight sums of every encoder
// self-attention, per head, with dropout off.
ExplainAwayReport explain_away(const decode::TrainedModel& trained, const std::vector<std::string>& texts,
                               const ExplainAwayOptions& options);

// {"checkpoint", "step", "epsilon", "sequences", "attentions": [{"name", "kind", "heads": [{"head", "keys",
//  "fraction_below_epsilon", "min_sum", "min_bound", "min_ratio", "median_sum",
//  "log10_histogram": {"edges", "counts"}}]}]}; scripts/plot_analysis.py draws it.
nlohmann::ordered_json to_json(const ExplainAwayReport& report, const decode::TrainedModel& trained);

}  // namespace hnas::analysis
