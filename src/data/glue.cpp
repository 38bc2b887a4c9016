#include "data/glue.h"

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <limits>
#include <cstdlib>
#include <filesystem>

#include "base/check.h"

namespace hnas::data {

namespace {

std::vector<std::string_view> split_tabs(std::string_view line) {
    std::vector<std::string_view> columns;
    size_t start = 0;
    for (size_t tab; (tab = line.find('\t', start)) != std::string_view::npos; start = tab + 1) {
        columns.push_back(line.substr(start, tab - start));
    }
    columns.push_back(line.substr(start));
    return columns;
}

// Calls visit(columns, line number) for every data row of a TSV file, checking that every row has the
// first row's column count and holds the columns the layout reads.
template <typename Visit>
void for_each_row(const std::string& path, const TsvLayout& layout, bool needs_label, DamagedLines damaged_lines, Visit visit) {
    LineReader reader(path);
    std::string_view line;
    size_t columns_per_row = 0;
    bool header_pending = layout.header;
    const int64_t needed = std::max({layout.text_a_column, layout.text_b_column, needs_label ? layout.label_column : int64_t{-1}});
    while (reader.next(line)) {
        const int64_t number = reader.line_number();
        if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
        if (!accept_line(line, path, number, damaged_lines) || is_blank(line)) continue;
        const std::vector<std::string_view> columns = split_tabs(line);
        if (columns_per_row == 0) columns_per_row = columns.size();
        HNAS_CHECK(columns.size() == columns_per_row, path, ":", number, ": ", columns.size(), " tab-separated columns, but ",
                   layout.header ? "the header has " : "the first row has ", columns_per_row);
        HNAS_CHECK(static_cast<int64_t>(columns.size()) > needed, path, ":", number, ": ", columns.size(),
                   " columns, but column ", needed, " (0-based) is read");
        if (header_pending) {
            header_pending = false;
            continue;
        }
        visit(columns, number);
    }
}

std::string known_labels(const std::vector<std::string>& names) {
    std::string known;
    for (const std::string& name : names) {
        if (!known.empty()) known.append(", ");
        known.append("\"").append(name).append("\"");
    }
    return known;
}

}  // namespace

std::vector<ClassificationExample> read_classification_file(const std::string& path, const TsvLayout& layout,
                                                            const LabelSpace& labels, bool with_labels,
                                                            DamagedLines damaged_lines) {
    HNAS_CHECK(labels.regression || !labels.names.empty() || !with_labels, path, ": no label names to read the labels with");
    std::vector<ClassificationExample> examples;
    for_each_row(path, layout, with_labels, damaged_lines, [&](const std::vector<std::string_view>& columns, int64_t line) {
        ClassificationExample example;
        example.line = line;
        example.text_a = std::string(columns[static_cast<size_t>(layout.text_a_column)]);
        HNAS_CHECK(!is_blank(example.text_a), path, ":", line, ": the text in column ", layout.text_a_column, " is empty");
        if (layout.text_b_column >= 0) {
            example.text_b = std::string(columns[static_cast<size_t>(layout.text_b_column)]);
            HNAS_CHECK(!is_blank(example.text_b), path, ":", line, ": the text in column ", layout.text_b_column, " is empty");
        }
        if (with_labels) {
            const std::string label(columns[static_cast<size_t>(layout.label_column)]);
            if (labels.regression) {
                char* end = nullptr;
                errno = 0;
                const double target = std::strtod(label.c_str(), &end);
                HNAS_CHECK(!label.empty() && end == label.c_str() + label.size() && errno == 0 && std::isfinite(target) &&
                               std::fabs(target) <= std::numeric_limits<float>::max(),
                           path, ":", line, ": the regression target \"", label, "\" is not a finite number a float can hold");
                example.target = static_cast<float>(target);
            } else {
                const auto found = std::find(labels.names.begin(), labels.names.end(), label);
                HNAS_CHECK(found != labels.names.end(), path, ":", line, ": unknown label \"", label, "\" (the labels are ",
                           known_labels(labels.names), ")");
                example.label = static_cast<int32_t>(found - labels.names.begin());
            }
        }
        examples.push_back(std::move(example));
    });
    HNAS_CHECK(!examples.empty(), path, ": no examples");
    return examples;
}

std::vector<std::string> collect_label_names(const std::string& path, const TsvLayout& layout, DamagedLines damaged_lines) {
    std::vector<std::string> names;
    for_each_row(path, layout, true, damaged_lines, [&](const std::vector<std::string_view>& columns, int64_t line) {
        const std::string label(columns[static_cast<size_t>(layout.label_column)]);
        HNAS_CHECK(!is_blank(label), path, ":", line, ": the label in column ", layout.label_column, " is empty");
        if (std::find(names.begin(), names.end(), label) == names.end()) names.push_back(label);
    });
    HNAS_CHECK(!names.empty(), path, ": no examples");
    return names;
}

EncodedPair encode_pair(std::vector<int32_t> a, std::vector<int32_t> b, bool pair, int64_t max_seq) {
    const size_t budget = static_cast<size_t>(max_seq - (pair ? 3 : 2));
    HNAS_CHECK(max_seq >= (pair ? 5 : 3), "encode_pair: max_seq ", max_seq, " leaves no room for the text");
    while (a.size() + b.size() > budget) {
        if (a.size() > b.size()) {
            a.pop_back();
        } else {
            b.pop_back();
        }
    }
    EncodedPair encoded;
    encoded.ids.push_back(kClsId);
    encoded.ids.insert(encoded.ids.end(), a.begin(), a.end());
    encoded.ids.push_back(kSepId);
    encoded.segments.assign(encoded.ids.size(), 0);
    if (pair) {
        encoded.ids.insert(encoded.ids.end(), b.begin(), b.end());
        encoded.ids.push_back(kSepId);
        encoded.segments.resize(encoded.ids.size(), 1);
    }
    return encoded;
}

ClassificationBatcher::ClassificationBatcher(const Tokenizer& tokenizer, ClassificationDataOptions options)
    : options_(std::move(options)) {
    examples_ = read_classification_file(options_.path, options_.layout, options_.labels, options_.with_labels,
                                         options_.damaged_lines);
    const bool pair = options_.layout.text_b_column >= 0;
    std::vector<int64_t> lengths;
    for (const ClassificationExample& example : examples_) {
        encoded_.push_back(encode_pair(tokenizer.encode(example.text_a),
                                       pair ? tokenizer.encode(example.text_b) : std::vector<int32_t>{}, pair, options_.max_seq));
        lengths.push_back(static_cast<int64_t>(encoded_.back().ids.size()));
    }
    // The batches depend on the file, the tokenizer and every option that shapes an example.
    std::error_code error;
    uint64_t fingerprint = hash_combine(tokenizer.model_hash(), std::filesystem::file_size(options_.path, error));
    for (uint64_t value : {static_cast<uint64_t>(options_.layout.text_a_column), static_cast<uint64_t>(options_.layout.text_b_column),
                           static_cast<uint64_t>(options_.layout.label_column), static_cast<uint64_t>(options_.layout.header),
                           static_cast<uint64_t>(options_.max_seq), static_cast<uint64_t>(options_.labels.regression),
                           static_cast<uint64_t>(options_.labels.names.size())}) {
        fingerprint = hash_combine(fingerprint, value);
    }
    batches_ = std::make_unique<EpochBatches>(std::move(lengths), options_.batch, options_.shuffle, options_.seed,
                                              options_.epochs, fingerprint, "classification data " + options_.path);
    if (options_.same_class_templates > 0.0) {
        HNAS_CHECK(!options_.labels.regression, "classification data ", options_.path,
                   ": same-class template partners need classes, not a regression target");
        std::vector<int32_t> labels;
        for (const ClassificationExample& example : examples_) labels.push_back(example.label);
        partners_ = std::make_unique<SameClassSampler>(labels, options_.same_class_templates);
    }
}

ClassificationBatch ClassificationBatcher::batch_of(const std::vector<uint32_t>& indices) const {
    std::vector<const std::vector<int32_t>*> ids, segments;
    std::vector<int32_t> labels;
    std::vector<float> targets;
    ClassificationBatch batch;
    for (uint32_t index : indices) {
        ids.push_back(&encoded_[index].ids);
        segments.push_back(&encoded_[index].segments);
        labels.push_back(examples_[index].label);
        targets.push_back(examples_[index].target);
        batch.example_index.push_back(index);
    }
    PaddedSequences padded = pad_sequences(ids, segments, options_.batch, options_.max_seq);
    batch.input_ids = std::move(padded.input_ids);
    batch.segment_ids = std::move(padded.segment_ids);
    batch.valid = std::move(padded.valid);
    batch.tokens = padded.tokens;
    const auto rows = static_cast<int64_t>(indices.size());
    batch.labels = Tensor::from_ints({rows}, labels);
    batch.targets = Tensor::from_floats({rows}, targets);
    return batch;
}

std::optional<ClassificationBatch> ClassificationBatcher::next() {
    const DataPosition at = batches_->position();
    const auto indices = batches_->next();
    if (!indices) return std::nullopt;
    ClassificationBatch batch = batch_of(*indices);
    if (partners_) batch.template_partner = partners_->draw_batch(*indices, options_.seed, at);
    return batch;
}

PartneredBatch ClassificationBatcher::with_template_partners(const ClassificationBatch& batch) const {
    const PartnerRows rows = append_partner_rows(batch.example_index, batch.template_partner, static_cast<int64_t>(examples_.size()),
                                                 "classification data " + options_.path);
    return {batch_of(rows.examples), static_cast<int64_t>(batch.example_index.size()), rows.partner_row};
}

}  // namespace hnas::data
