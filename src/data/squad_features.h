// Span-extraction data as SQuAD 1.1 and 2.0 distribute it (data → paragraphs → qas), turned into the
// features BERT's run_squad.py builds: the context split into whitespace words, each word tokenized
// on its own; the question cut to max_query pieces; windows of the context every doc_stride pieces, each
// [CLS] question [SEP] window [SEP] within max_seq; for training, the answer's first and last piece in
// the window (refined to the pieces that spell the answer, run_squad's _improve_answer_span), or 0
// ([CLS]) when the answer is outside the window or the question has none; and for prediction, which
// window is each piece's "max context" (run_squad's _check_is_max_context). Errors name the file and
// the JSON path.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "data/batch.h"
#include "data/epoch_batches.h"
#include "data/tokenizer.h"

namespace hnas::data {

struct SquadAnswer {
    std::string text;
    int64_t start = 0;  // byte offset into the context
};

struct SquadExample {
    std::string id, question, context;
    std::vector<SquadAnswer> answers;         // empty for an impossible question (SQuAD 2.0)
    std::vector<std::pair<size_t, size_t>> words;  // byte [begin, end) of each whitespace word of the context
};

struct SquadFile {
    std::vector<SquadExample> examples;
    bool version_2 = false;  // "version" v2.x or any is_impossible: questions may have no answer
};

// Reads and checks a SQuAD JSON file: required keys and types, answers whose text is the context at
// answer_start, unique question ids.
SquadFile read_squad(const std::string& path);

struct SpanFeature {
    int64_t example = 0;                // index into SquadFile::examples
    std::vector<int32_t> ids, segments;
    std::vector<int64_t> word;          // per position: the context word it belongs to, -1 outside the window
    std::vector<uint8_t> max_context;   // per position: 1 when this window is its piece's max context
    int32_t start = 0, end = 0;         // training target: the first answer's pieces, or 0 ([CLS])
};

struct SpanFeatureOptions {
    int64_t max_seq = 384, doc_stride = 128, max_query = 64;
};

// The windows of every example, in example order.
std::vector<SpanFeature> make_span_features(const SquadFile& file, const Tokenizer& tokenizer, const SpanFeatureOptions& options);

struct SpanDataOptions {
    std::string path;
    SpanFeatureOptions features;
    bool shuffle = true;  // false: batches in length order (validation, prediction)
    uint64_t seed = 0;
    BatchOptions batch;
    int64_t epochs = 0;   // 0: never ends
};

class SpanBatcher {
public:
    SpanBatcher(const Tokenizer& tokenizer, SpanDataOptions options);

    std::optional<SpanBatch> next();
    DataPosition position() const { return batches_->position(); }
    void restore(const DataPosition& position) { batches_->restore(position); }
    const SquadFile& file() const { return file_; }
    const std::vector<SpanFeature>& features() const { return features_; }

private:
    SpanDataOptions options_;
    SquadFile file_;
    std::vector<SpanFeature> features_;
    std::unique_ptr<EpochBatches> batches_;
};

}  // namespace hnas::data
