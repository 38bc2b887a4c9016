// Batched beam search over a seq2seq model with the decoder's keys and values cached across steps
// (Seq2SeqModel::decode_step). Finished hypotheses are ranked by log P / length^A, the length
// penalty of fairseq, OpenNMT and CTranslate2, where the length counts the generated tokens and eos.
// Beam 1 is greedy decoding.
#pragma once

#include <cstdint>
#include <vector>

#include "config/experiment_config.h"
#include "models/seq2seq.h"

namespace hnas::decode {

// The decoding settings (config::DecodingConfig, whose defaults are the only ones) and how many
// hypotheses to return.
struct BeamOptions : config::DecodingConfig {
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
