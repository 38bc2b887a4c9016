// Greedy decoding of a seq2seq model: at each step the most likely next token, until every row has
// produced eos or max_length tokens. It recomputes the decoder over the whole prefix each step (no
// key/value cache), which is simple and exact; the trainer uses it on validation subsets.
#pragma once

#include <cstdint>
#include <vector>

#include "models/seq2seq.h"

namespace hnas::decode {

// Token ids of each row's output, without bos and eos.
std::vector<std::vector<int32_t>> greedy_decode(const models::Seq2SeqModel& model, const Tensor& source_ids,
                                                const Tensor& source_valid, int64_t max_length, int32_t bos_id,
                                                int32_t eos_id);

}  // namespace hnas::decode
