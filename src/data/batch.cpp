// Sharding a batch between data-parallel ranks (see batch.h).
#include "data/batch.h"

#include <algorithm>
#include <cstring>

#include "data/tokenizer.h"

#include "base/check.h"

namespace hnas::data {

namespace {

// Rows [first, last) of a tensor whose first axis is the batch.
Tensor rows_of(const Tensor& tensor, int64_t first, int64_t last) {
    Shape shape = tensor.shape();
    const int64_t row = tensor.numel() / shape[0];
    shape[0] = last - first;
    Tensor out = Tensor::empty(shape, tensor.dtype());
    const size_t element = tensor.dtype() == DType::i32 ? sizeof(int32_t) : sizeof(float);
    const auto* from = static_cast<const char*>(tensor.dtype() == DType::i32 ? static_cast<const void*>(tensor.ints())
                                                                             : static_cast<const void*>(tensor.data()));
    void* to = tensor.dtype() == DType::i32 ? static_cast<void*>(out.ints()) : static_cast<void*>(out.data());
    std::memcpy(to, from + static_cast<size_t>(first * row) * element, static_cast<size_t>(out.numel()) * element);
    return out;
}

int64_t count_valid(const Tensor& valid) {
    int64_t count = 0;
    for (int64_t i = 0; i < valid.numel(); ++i) count += valid.data()[i] > 0.0f ? 1 : 0;
    return count;
}

void check_rows(int64_t rows, int64_t first, int64_t last) {
    HNAS_CHECK(0 <= first && first < last && last <= rows, "slice_rows: rows [", first, ", ", last, ") of a batch of ",
               rows);
}

}  // namespace

std::pair<int64_t, int64_t> shard_rows(int64_t rows, int rank, int ranks) {
    HNAS_CHECK(ranks >= 1 && 0 <= rank && rank < ranks, "shard_rows: rank ", rank, " of ", ranks);
    return {rows * rank / ranks, rows * (rank + 1) / ranks};
}

Seq2SeqBatch slice_rows(const Seq2SeqBatch& batch, int64_t first, int64_t last) {
    check_rows(batch.source_ids.dim(0), first, last);
    Seq2SeqBatch out;
    out.source_ids = rows_of(batch.source_ids, first, last);
    out.source_valid = rows_of(batch.source_valid, first, last);
    out.target_input = rows_of(batch.target_input, first, last);
    out.target_output = rows_of(batch.target_output, first, last);
    out.target_valid = rows_of(batch.target_valid, first, last);
    out.example_index.assign(batch.example_index.begin() + first, batch.example_index.begin() + last);
    out.source_tokens = count_valid(out.source_valid);
    out.target_tokens = count_valid(out.target_valid);
    return out;
}

MlmBatch slice_rows(const MlmBatch& batch, int64_t first, int64_t last) {
    check_rows(batch.input_ids.dim(0), first, last);
    const int64_t length = batch.input_ids.dim(1);
    MlmBatch out;
    out.input_ids = rows_of(batch.input_ids, first, last);
    out.segment_ids = rows_of(batch.segment_ids, first, last);
    out.valid = rows_of(batch.valid, first, last);
    out.sentence_order = rows_of(batch.sentence_order, first, last);
    std::vector<int32_t> positions, labels;
    for (int64_t i = 0; i < batch.masked_positions.numel(); ++i) {
        const int64_t position = batch.masked_positions.ints()[i];
        if (position >= first * length && position < last * length) {
            positions.push_back(static_cast<int32_t>(position - first * length));
            labels.push_back(batch.masked_labels.ints()[i]);
        }
    }
    const auto masked = static_cast<int64_t>(positions.size());
    out.masked_positions = Tensor::from_ints({masked}, positions);
    out.masked_labels = Tensor::from_ints({masked}, labels);
    out.tokens = count_valid(out.valid);
    out.batch_rows = batch.batch_rows;
    return out;
}

ClassificationBatch slice_rows(const ClassificationBatch& batch, int64_t first, int64_t last) {
    check_rows(batch.input_ids.dim(0), first, last);
    ClassificationBatch out;
    out.input_ids = rows_of(batch.input_ids, first, last);
    out.segment_ids = rows_of(batch.segment_ids, first, last);
    out.valid = rows_of(batch.valid, first, last);
    out.labels = rows_of(batch.labels, first, last);
    out.targets = rows_of(batch.targets, first, last);
    out.example_index.assign(batch.example_index.begin() + first, batch.example_index.begin() + last);
    if (!batch.template_partner.empty()) {
        out.template_partner.assign(batch.template_partner.begin() + first, batch.template_partner.begin() + last);
    }
    out.tokens = count_valid(out.valid);
    return out;
}

ImageBatch slice_rows(const ImageBatch& batch, int64_t first, int64_t last) {
    check_rows(batch.patches.dim(0), first, last);
    ImageBatch out;
    out.patches = rows_of(batch.patches, first, last);
    out.labels = rows_of(batch.labels, first, last);
    out.example_index.assign(batch.example_index.begin() + first, batch.example_index.begin() + last);
    if (!batch.template_partner.empty()) {
        out.template_partner.assign(batch.template_partner.begin() + first, batch.template_partner.begin() + last);
    }
    return out;
}

SpanBatch slice_rows(const SpanBatch& batch, int64_t first, int64_t last) {
    check_rows(batch.input_ids.dim(0), first, last);
    SpanBatch out;
    out.input_ids = rows_of(batch.input_ids, first, last);
    out.segment_ids = rows_of(batch.segment_ids, first, last);
    out.valid = rows_of(batch.valid, first, last);
    out.start_positions = rows_of(batch.start_positions, first, last);
    out.end_positions = rows_of(batch.end_positions, first, last);
    out.feature_index.assign(batch.feature_index.begin() + first, batch.feature_index.begin() + last);
    out.tokens = count_valid(out.valid);
    return out;
}

PaddedSequences pad_sequences(const std::vector<const std::vector<int32_t>*>& ids,
                              const std::vector<const std::vector<int32_t>*>& segments, const BatchOptions& options,
                              int64_t limit) {
    HNAS_CHECK(!ids.empty() && ids.size() == segments.size(), "pad_sequences: ", ids.size(), " rows of ids and ",
               segments.size(), " of segments");
    size_t longest = 0;
    for (const auto* row : ids) longest = std::max(longest, row->size());
    longest = static_cast<size_t>(padded_length(static_cast<int64_t>(longest), options, limit));
    const size_t rows = ids.size();
    std::vector<int32_t> padded_ids(rows * longest, kPadId), padded_segments(rows * longest, 0);
    std::vector<float> valid(rows * longest, 0.0f);
    PaddedSequences out;
    for (size_t r = 0; r < rows; ++r) {
        HNAS_CHECK(ids[r]->size() == segments[r]->size(), "pad_sequences: row ", r, " has ", ids[r]->size(), " ids and ",
                   segments[r]->size(), " segment ids");
        std::copy(ids[r]->begin(), ids[r]->end(), padded_ids.begin() + static_cast<std::ptrdiff_t>(r * longest));
        std::copy(segments[r]->begin(), segments[r]->end(), padded_segments.begin() + static_cast<std::ptrdiff_t>(r * longest));
        std::fill_n(valid.begin() + static_cast<std::ptrdiff_t>(r * longest), ids[r]->size(), 1.0f);
        out.tokens += static_cast<int64_t>(ids[r]->size());
    }
    const Shape shape{static_cast<int64_t>(rows), static_cast<int64_t>(longest)};
    out.input_ids = Tensor::from_ints(shape, padded_ids);
    out.segment_ids = Tensor::from_ints(shape, padded_segments);
    out.valid = Tensor::from_floats(shape, valid);
    return out;
}

}  // namespace hnas::data
