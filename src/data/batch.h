// The batches the data pipeline hands to the models: padded id tensors plus the masks built once per
// batch. These structs are the contract between src/data and the model code.
#pragma once

#include <cstdint>
#include <utility>
#include <vector>

#include "data/batching.h"
#include "tensor/tensor.h"

namespace hnas::data {

// One batch of Gigaword (article → headline) pairs, padded to the longest row of the batch.
struct Seq2SeqBatch {
    Tensor source_ids;     // (B, S) int32 article ids, padded with pad id 0
    Tensor source_valid;   // (B, S) f32, 1 for real tokens, 0 for padding
    Tensor target_input;   // (B, T) int32: bos, y_1 .. y_n, padded (teacher-forcing decoder input)
    Tensor target_output;  // (B, T) int32: y_1 .. y_n, eos, padded with pad id 0 (the loss ignores pad)
    Tensor target_valid;   // (B, T) f32, 1 where target_output is y_i or eos
    std::vector<int64_t> example_index;  // 0-based line of the corpus each row came from
    int64_t source_tokens = 0, target_tokens = 0;  // real (unpadded) tokens; target counts eos
};

// One batch of masked-LM sequences [CLS] A [SEP] B [SEP], padded to the longest row of the batch.
struct MlmBatch {
    Tensor input_ids;         // (B, L) int32 with masking applied, pad 0
    Tensor segment_ids;       // (B, L) int32: 0 for [CLS] A [SEP] and padding, 1 for B [SEP]
    Tensor valid;             // (B, L) f32, 1 for real tokens
    Tensor masked_positions;  // (N) int32 flat indices b*L + t of the tokens to predict, ascending
    Tensor masked_labels;     // (N) int32 original ids at those positions
    Tensor sentence_order;    // (B) int32: 1 if the two segments were swapped (ALBERT's SOP label)
    int64_t tokens = 0;       // real (unpadded) tokens
    int64_t batch_rows = 0;   // rows of the whole batch, of which these may be one rank's share (MlmBatcher::share)
};

// One batch of fine-tuning sequences [CLS] A [SEP] (B [SEP]) with one label each (classify), padded to
// the longest row of the batch.
struct ClassificationBatch {
    Tensor input_ids;    // (B, L) int32, pad 0
    Tensor segment_ids;  // (B, L) int32: 0 for [CLS] A [SEP] and padding, 1 for B [SEP]
    Tensor valid;        // (B, L) f32, 1 for real tokens
    Tensor labels;       // (B) int32 class ids (0 for a regression target)
    Tensor targets;      // (B) f32 regression targets (0 for classes)
    std::vector<int64_t> example_index;  // 0-based example of the file each row came from
    int64_t tokens = 0;  // real (unpadded) tokens
    // Paper 003 §9 (data.same_class_templates): per row, the example of the same file whose templates
    // the row also sees in the layers that compare templates; −1: none. Empty: none were drawn.
    std::vector<int64_t> template_partner;
};

// One batch of images (data/images.h): patches (B, P, p²) and labels (B); as ClassificationBatch for
// the rest.
struct ImageBatch {
    Tensor patches;
    Tensor labels;
    std::vector<int64_t> example_index;
    std::vector<int64_t> template_partner;  // paper 003 §9, as ClassificationBatch's; empty: none drawn
};

// One batch of span-extraction windows [CLS] question [SEP] context window [SEP] (span), padded.
struct SpanBatch {
    Tensor input_ids;        // (B, L) int32, pad 0
    Tensor segment_ids;      // (B, L) int32: 0 for [CLS] question [SEP] and padding, 1 for the window and its [SEP]
    Tensor valid;            // (B, L) f32
    Tensor start_positions;  // (B) int32: the answer's first piece in the row, 0 ([CLS]) when not in the window
    Tensor end_positions;    // (B) int32: its last piece, 0 likewise
    std::vector<int64_t> feature_index;  // 0-based window (feature) each row came from
    int64_t tokens = 0;
};

// Data-parallel sharding: rank `rank` of `ranks` trains on rows [first, last) of every global batch,
// the rank-th of `ranks` near-equal contiguous slices (empty when the batch has fewer rows than ranks).
std::pair<int64_t, int64_t> shard_rows(int64_t rows, int rank, int ranks);

// Rows [first, last) (first < last) of a batch, still padded to the whole batch's length so that each
// row is computed exactly as in the whole batch; token counts are those of the rows kept, and an MLM
// slice keeps the masked positions of its rows, renumbered.
Seq2SeqBatch slice_rows(const Seq2SeqBatch& batch, int64_t first, int64_t last);
MlmBatch slice_rows(const MlmBatch& batch, int64_t first, int64_t last);
ClassificationBatch slice_rows(const ClassificationBatch& batch, int64_t first, int64_t last);
ImageBatch slice_rows(const ImageBatch& batch, int64_t first, int64_t last);
SpanBatch slice_rows(const SpanBatch& batch, int64_t first, int64_t last);

// Padded (B, L) input_ids, segment_ids and valid of sequences of different lengths: L is the longest
// row's length as padded_length() rounds it (batching.h), at most `limit`.
struct PaddedSequences {
    Tensor input_ids, segment_ids, valid;
    int64_t tokens = 0;
};
PaddedSequences pad_sequences(const std::vector<const std::vector<int32_t>*>& ids,
                              const std::vector<const std::vector<int32_t>*>& segments, const BatchOptions& options,
                              int64_t limit);

}  // namespace hnas::data
