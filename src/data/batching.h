// What the Gigaword and masked-LM pipelines share: batch composition (length bucketing under a
// sentence count or a token budget), the data position that makes a run resumable, and the seeded
// random streams every random choice of the pipeline is drawn from.
//
// Resumability without saving buffers: every random choice is drawn from a stream derived from
// (seed, purpose, epoch, window), never from a generator carried along, so the batches from any
// position onwards are a pure function of the files, the options and the position itself. A resumed
// run re-reads the current window and skips the batches already delivered.
#pragma once

#include <cstdint>
#include <nlohmann/json_fwd.hpp>
#include <span>
#include <utility>
#include <vector>

#include "base/rng.h"

namespace hnas::data {

struct BatchOptions {
    int64_t max_sentences = 32;  // rows per batch; 0 = no limit (then max_tokens must be set)
    int64_t max_tokens = 0;      // padded tokens per batch, rows × padded length; 0 = no limit
    int64_t pad_multiple = 1;    // the padded length rounds the longest row up to a multiple of this
};

// The length a batch is padded to when its longest row has `longest` tokens: rounded up to a multiple
// of options.pad_multiple, and never past `limit`, the longest row the data allows (the position
// tables' size). Few distinct lengths mean few distinct tensor shapes, which the allocator and oneDNN's
// primitive cache reuse from batch to batch (docs/performance.md).
int64_t padded_length(int64_t longest, const BatchOptions& options, int64_t limit);

// A data position's fingerprint with the padding folded in; padding to the longest row (pad_multiple 1,
// as every run before data.pad_multiple existed) leaves it as it was, so those runs' checkpoints still resume.
uint64_t hash_padding(uint64_t fingerprint, const BatchOptions& options);

// Throws unless the options allow a batch at all and a row of `longest_row` tokens fits max_tokens.
void check_batch_options(const BatchOptions& options, int64_t longest_row, const char* context);

// Length bucketing: sorts examples by sort_keys (ties in random order when `rng` is given, else in
// index order), cuts the sorted run greedily into batches that respect max_sentences and
// max_tokens (rows × the largest row_size of the batch), then shuffles the batch order with `rng`.
// Sorting first keeps rows of a batch alike in length, so padding stays small. Returns the example
// indices of each batch.
std::vector<std::vector<uint32_t>> plan_batches(std::span<const uint64_t> sort_keys,
                                                std::span<const int64_t> row_sizes, const BatchOptions& options,
                                                Rng* rng);

// Where a pipeline is: the next batch it will deliver. Save it with a checkpoint (to_json) and pass
// it to the pipeline's restore() to continue with exactly the batches an uninterrupted run gets.
struct DataPosition {
    int64_t epoch = 0;
    int64_t window = 0;    // Gigaword: shuffle window within the epoch; masked LM: always 0
    int64_t batch = 0;     // next batch within the window
    int64_t examples = 0;  // examples delivered so far in this epoch (progress reporting)
    // Hash of the data files' sizes, the tokenizer model and every option that shapes the batches:
    // restoring into a pipeline with a different fingerprint is an error.
    uint64_t fingerprint = 0;

    bool operator==(const DataPosition&) const = default;
};

// JSON object {"epoch", "window", "batch", "examples", "fingerprint" (16 hex digits)}.
void to_json(nlohmann::json& json, const DataPosition& position);
// Throws naming the missing or malformed key.
void from_json(const nlohmann::json& json, DataPosition& position);

// The random stream for one purpose (a tag), epoch and window under a run's seed.
Rng derive_rng(uint64_t seed, uint64_t purpose, uint64_t epoch, uint64_t window = 0);

// Fisher-Yates shuffle driven by an hnas Rng (std::shuffle's results differ between libraries).
template <typename T>
void shuffle_in_place(std::vector<T>& items, Rng& rng) {
    for (size_t i = items.size(); i > 1; --i) {
        const size_t j = static_cast<size_t>(rng.below(i));
        std::swap(items[i - 1], items[j]);
    }
}


}  // namespace hnas::data
