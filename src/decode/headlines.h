// Headline generation for raw article text: tokenization, length-sorted batches, beam search and
// detokenization. Used by `hnas decode`, `hnas eval` and the trainer's validation.
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "backend/matmul.h"
#include "base/json.h"
#include "data/tokenizer.h"
#include "decode/beam_search.h"

namespace hnas::decode {

// Decoding settings given on a command line; those unset keep the configured ones (a headline run's test
// section), so a model decodes as its run is tested.
struct DecodeSettings {
    std::optional<int64_t> beam, min_length, max_length, no_repeat_ngram;
    std::optional<double> length_penalty;
    int64_t nbest = 1;       // hypotheses per article (≤ beam)
    int64_t batch = 32;      // articles decoded together
    int64_t max_source = 0;  // source pieces kept per article; 0: the training config's
    backend::MatmulPrecision precision = backend::MatmulPrecision::f32;
};

// The settings as hnas eval hands them to a task through JSON (unset ones left out), and back.
Json settings_json(const DecodeSettings& settings);
DecodeSettings decode_settings(const Json& json);

// `configured` with the settings given on top; throws naming an option out of range.
BeamOptions beam_options(const DecodingConfig& configured, const DecodeSettings& given);

struct DecodedHeadline {
    std::string text;  // detokenized and lowercased, as the Gigaword references are
    double score = 0;  // the hypothesis' length-normalized log-probability
};

// Articles as the model reads them: cut to max_source pieces, sorted by length so batches carry little
// padding, `batch` at a time, padded to a multiple of 8 pieces (within max_source); each batch's rows are the articles at `articles` (input order indices).
struct SourceBatch {
    Tensor ids;    // (rows, longest) piece ids, padded with kPadId
    Tensor valid;  // (rows, longest) 1 for real pieces
    std::vector<size_t> articles;
};
std::vector<SourceBatch> source_batches(const data::Tokenizer& tokenizer, const std::vector<std::string>& articles,
                                        int64_t batch, int64_t max_source);

// For each article, in input order, up to options.nbest headlines, best first. Articles are cut to
// max_source pieces and decoded in the batches of source_batches(); `progress(done, total)` is called
// after each batch.
std::vector<std::vector<DecodedHeadline>> decode_articles(const models::Seq2SeqModel& model,
                                                          const data::Tokenizer& tokenizer,
                                                          const std::vector<std::string>& articles,
                                                          const BeamOptions& options, int64_t batch, int64_t max_source,
                                                          const std::function<void(size_t, size_t)>& progress = {});

}  // namespace hnas::decode
