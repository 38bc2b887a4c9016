// Fine-tuning data of sentence and sentence-pair classification as GLUE distributes it: a TSV file,
// one example per line, with the text (or the two texts) and the label in given columns, after an
// optional header line. Labels are class names mapped to ids in a given order, or one number for a
// regression task (STS-B). Each example becomes [CLS] A [SEP] (B [SEP]) with segment ids 0 then 1, cut
// to max_seq pieces by BERT's longest-first rule. Errors name the file and the 1-based line.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "base/text_io.h"
#include "data/batch.h"
#include "data/epoch_batches.h"
#include "data/same_class_sampler.h"
#include "data/tokenizer.h"

namespace hnas::data {

struct TsvLayout {
    int64_t text_a_column = 0;
    int64_t text_b_column = -1;  // -1: single texts
    int64_t label_column = 1;
    bool header = true;          // the first line names the columns and is skipped
};

struct LabelSpace {
    bool regression = false;
    std::vector<std::string> names;  // classes, in id order
};

struct ClassificationExample {
    std::string text_a, text_b;
    int32_t label = 0;    // class id
    float target = 0.0f;  // regression target
    int64_t line = 0;     // 1-based line of the file
};

// The examples of a file. Without `with_labels` (prediction) the label column may be absent or hold
// anything. Throws naming file and line: a row whose column count differs from the first row's, a
// column beyond the row, an empty text, an unknown label (listing the known ones), a regression
// target that is not a finite number.
std::vector<ClassificationExample> read_classification_file(const std::string& path, const TsvLayout& layout,
                                                            const LabelSpace& labels, bool with_labels,
                                                            DamagedLines damaged_lines);
// The class names of a file's label column in order of first appearance.
std::vector<std::string> collect_label_names(const std::string& path, const TsvLayout& layout, DamagedLines damaged_lines);

// [CLS] a [SEP] (b [SEP]) and its segment ids; while it is longer than max_seq, a piece goes from the
// end of the longer text (of b on a tie; BERT's _truncate_seq_pair).
struct EncodedPair {
    std::vector<int32_t> ids, segments;
};
EncodedPair encode_pair(std::vector<int32_t> a, std::vector<int32_t> b, bool pair, int64_t max_seq);

struct ClassificationDataOptions {
    std::string path;
    TsvLayout layout;
    LabelSpace labels;
    int64_t max_seq = 128;
    DamagedLines damaged_lines = DamagedLines::reject;
    bool shuffle = true;   // false: batches in length order (validation, prediction)
    uint64_t seed = 0;
    BatchOptions batch;
    int64_t epochs = 0;    // next() ends after this many epochs; 0 = never
    bool with_labels = true;
    // Paper 003 §9: the probability that a row gets a template partner (ClassificationBatch::
    // template_partner), another example of its class in this file; 0: none.
    double same_class_templates = 0.0;
};

// A batch whose rows' template partners are rows of it: the input rows, then one row per partner;
// partner_row[r] is the row of row r's partner (−1: none; the partner rows have none).
struct PartneredBatch {
    ClassificationBatch batch;
    int64_t inputs = 0;
    std::vector<int64_t> partner_row;
};

class ClassificationBatcher {
public:
    // Reads and encodes every example of the file.
    ClassificationBatcher(const Tokenizer& tokenizer, ClassificationDataOptions options);

    std::optional<ClassificationBatch> next();
    // `batch` (of this file, with template partners drawn) with its partners appended as rows.
    PartneredBatch with_template_partners(const ClassificationBatch& batch) const;
    DataPosition position() const { return batches_->position(); }
    void restore(const DataPosition& position) { batches_->restore(position); }
    const std::vector<ClassificationExample>& examples() const { return examples_; }

private:
    ClassificationBatch batch_of(const std::vector<uint32_t>& indices) const;

    ClassificationDataOptions options_;
    std::vector<ClassificationExample> examples_;
    std::vector<EncodedPair> encoded_;
    std::unique_ptr<EpochBatches> batches_;
    std::unique_ptr<SameClassSampler> partners_;  // with same_class_templates
};

}  // namespace hnas::data
