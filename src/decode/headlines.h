// Headline generation for raw article text: tokenization, length-sorted batches, beam search and
// detokenization. Used by `hnas decode`, `hnas eval` and the trainer's validation.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "data/tokenizer.h"
#include "decode/beam_search.h"

namespace hnas::decode {

struct DecodedHeadline {
    std::string text;  // detokenized and lowercased, as the Gigaword references are
    double score = 0;  // the hypothesis' length-normalized log-probability
};

// For each article, in input order, up to options.nbest headlines, best first. Articles are cut to
// max_source pieces and decoded `batch` at a time, sorted by length so batches carry little padding;
// `progress(done, total)` is called after each batch.
std::vector<std::vector<DecodedHeadline>> decode_articles(const models::Seq2SeqModel& model,
                                                          const data::Tokenizer& tokenizer,
                                                          const std::vector<std::string>& articles,
                                                          const BeamOptions& options, int64_t batch, int64_t max_source,
                                                          const std::function<void(size_t, size_t)>& progress = {});

}  // namespace hnas::decode
