// The explaining-away statistic (paper 004, §4: Definition 1, Theorem 2 and Fig. 1): for every real
// key j of a sequence, the total weight Σ_i A_ij its queries give it. Under softmax attention (LNAS) a
// key can be "explained away" (total weight near 0: no query uses it); doubly-normalized attention
// guarantees Σ_i A_ij ≥ 1/L
// for L real keys (paper 000, Lemma 1). Measured on the bidirectional attentions of a model: by
// `hnas analyze explain-away` on a checkpoint, and by the trainer at each validation (metrics.jsonl).
#pragma once

#include <string>
#include <vector>

#include "base/json.h"
#include "tasks/trained_model.h"

namespace hnas::analysis {

struct ExplainAwayOptions {
    double epsilon = 1e-3;         // a key whose total weight is below this is explained away
    int64_t max_sequences = 1000;  // texts read from the input (0: all)
    int64_t batch = 32;
    // The histogram of ln Σ_i A_ij: unit bins over [ln_low, ln_high). Paper 004 Fig. 1 shows LNAS mass
    // below e^-20, so the range reaches e^-40; sums below it (0 included: float underflow) are counted
    // apart rather than clamped into the first bin. No sum exceeds L ≤ e^ln_high for L ≤ 148.
    int ln_low = -40, ln_high = 5;
    int64_t groups = 10;  // pieces and positions listed per head among its explained-away keys
};

// Where a key lies: its sequence (in the order the forward pass read them) and its position there.
struct KeyPlace {
    int64_t sequence = 0, position = 0;
};

// A group of a head's explained-away keys (those of one piece, or at one position): how many of them
// it holds, and how many keys of its label there are at all (a piece always explained away is not a
// frequent one).
struct KeyGroup {
    std::string label;  // the piece's text, or the position
    int64_t below_epsilon = 0, occurrences = 0;
};

struct HeadKeyWeights {
    int64_t keys = 0;                     // real keys seen
    int64_t below_epsilon = 0;
    double min_sum = 0;                   // smallest Σ_i A_ij over all keys
    double min_bound = 0;                 // 1/L of the sequence holding that key (Lemma 1's bound)
    double min_ratio = 0;                 // smallest Σ_i A_ij · L (≥ 1 under DNAS)
    double median_sum = 0;
    std::vector<int64_t> histogram;       // counts of ln Σ_i A_ij per unit bin from ln_low
    int64_t below_range = 0;              // sums below e^ln_low
    int64_t above_range = 0;              // sums at or above e^ln_high
    int64_t negative = 0;                 // sums below 0 (nap and non weights may be negative) or NaN: no logarithm
    std::vector<KeyPlace> explained_away;  // every key below epsilon
    // Which keys they are (explain_away only, where the texts are known): the pieces and the positions
    // most often below epsilon, at most ExplainAwayOptions::groups of each, the most frequent first.
    std::vector<KeyGroup> pieces_below_epsilon, positions_below_epsilon;
};

struct AttentionKeyWeights {
    std::string name, kind;
    std::vector<HeadKeyWeights> heads;
    // Keys below epsilon in every head: only their information is lost to the attention's output (a key
    // one head drops, another may carry; paper 004 §1).
    int64_t below_epsilon_in_every_head = 0;
};

struct ExplainAwayReport {
    ExplainAwayOptions options;
    int64_t sequences = 0;
    std::vector<AttentionKeyWeights> attentions;
};

// A text's token ids as the model's encoder reads them (the task's TaskDefinition::encoder_ids); throws
// for a task whose inputs are not text.
std::vector<int32_t> encoder_input(const config::ExperimentConfig& config, const data::Tokenizer& tokenizer,
                                   const std::string& text);

// A forward pass of a token model's encoder over `rows` (encoder_input's), `batch` rows at a time.
models::DiagnosticForward encoder_forward(const models::Model& model, std::vector<std::vector<int32_t>> rows, int64_t batch);

// Runs `forward` over its batches and gathers the per-key weight sums of every bidirectional attention
// of the model (the encoder self-attentions; the multi-view model's fusion), per head, each key's
// Lemma 1 bound 1/L from the real keys of its row. The caller turns dropout off.
ExplainAwayReport measure_key_weights(const models::Model& model, const models::DiagnosticForward& forward,
                                      const ExplainAwayOptions& options);

// measure_key_weights over the first options.max_sequences texts, with dropout off, and which pieces
// and positions each head's explained-away keys are.
ExplainAwayReport explain_away(const tasks::TrainedModel& trained, const std::vector<std::string>& texts,
                               const ExplainAwayOptions& options);

// {"epsilon", "sequences", "attentions": [{"name", "kind", "below_epsilon_in_every_head",
//  "heads": [{"head", "keys", "fraction_below_epsilon",
//  "min_sum", "min_bound", "min_ratio", "median_sum",
//  "ln_histogram": {"edges", "counts", "below_range", "above_range", "negative"},
//  "pieces_below_epsilon": [{"piece", "below_epsilon", "occurrences"}],
//  "positions_below_epsilon": [{"position", "below_epsilon", "occurrences"}]}]}]};
// scripts/plot_analysis.py draws it.
Json to_json(const ExplainAwayReport& report);

}  // namespace hnas::analysis
