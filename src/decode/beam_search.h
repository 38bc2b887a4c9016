// Batched beam search over a seq2seq model with the decoder's keys and values cached across steps
// (Seq2SeqModel::decode_step). Finished hypotheses are ranked by log P / length^A, the length
// penalty of fairseq, OpenNMT and CTranslate2, where the length counts the generated tokens and eos.
// Beam 1 is greedy decoding.
#pragma once

#include <cstdint>
#include <vector>

#include "models/seq2seq.h"

namespace hnas::decode {

// How headlines are decoded: a headline run's test section (tasks/headline/headline_options.h), and what
// `hnas decode` and `hnas eval` use for every option they are not given. The defaults were chosen on the
// validation pairs (scripts/recipe.sh decoding, docs/main_job.md "Decoding settings").
struct DecodingConfig {
    int64_t beam = 8;             // 1: greedy
    double length_penalty = 1.0;  // A: hypotheses ranked by log P / (tokens + 1)^A; 0 ranks by log P
    int64_t min_length = 1;       // eos is not allowed before this many tokens
    int64_t max_length = 30;      // tokens before eos (also bounded by the model's target positions)
    int64_t no_repeat_ngram = 2;  // n > 0: no n-gram of pieces occurs twice in a hypothesis
};

// The decoding settings and how many hypotheses to return.
struct BeamOptions : DecodingConfig {
    int64_t nbest = 1;  // hypotheses kept per source, best first; at most `beam`
};

// Throws naming the option when a value is out of range.
void check_beam_options(const BeamOptions& options);

struct Hypothesis {
    std::vector<int32_t> tokens;  // without bos and eos
    double log_probability = 0;   // of the tokens and the final eos
    double score = 0;             // log_probability / (tokens + 1)^A
};

// For every row of source_ids (B, S) with source_valid (B, S), up to `nbest` hypotheses, best first.
// The model must be in evaluation mode (no dropout).
std::vector<std::vector<Hypothesis>> beam_search(const models::Seq2SeqModel& model, const Tensor& source_ids,
                                                 const Tensor& source_valid, const BeamOptions& options,
                                                 int32_t bos_id, int32_t eos_id);

}  // namespace hnas::decode
