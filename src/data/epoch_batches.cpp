#include "data/epoch_batches.h"

#include <algorithm>

#include "base/check.h"
#include "base/hash.h"

namespace hnas::data {

namespace {
constexpr uint64_t kEpochStream = 0xE90C'0001;  // purpose of the per-epoch shuffling stream (batching.h)
}  // namespace

EpochBatches::EpochBatches(std::vector<int64_t> lengths, BatchOptions batch, bool shuffle, uint64_t seed, int64_t epochs,
                           uint64_t fingerprint, std::string what)
    : lengths_(std::move(lengths)), batch_(batch), shuffle_(shuffle), seed_(seed), epochs_(epochs), what_(std::move(what)) {
    HNAS_CHECK(!lengths_.empty(), what_, ": no examples");
    HNAS_CHECK(epochs_ >= 0, what_, ": epochs must not be negative");
    check_batch_options(batch_, *std::max_element(lengths_.begin(), lengths_.end()), what_.c_str());
    for (uint64_t value : {static_cast<uint64_t>(shuffle_), static_cast<uint64_t>(batch_.max_sentences),
                           static_cast<uint64_t>(batch_.max_tokens), seed_, static_cast<uint64_t>(lengths_.size())}) {
        fingerprint = hash_combine(fingerprint, value);
    }
    fingerprint = hash_padding(fingerprint, batch_);
    position_.fingerprint = fingerprint;
}

std::optional<std::vector<uint32_t>> EpochBatches::next() {
    if (epochs_ > 0 && position_.epoch >= epochs_) return std::nullopt;
    plan_epoch();
    std::vector<uint32_t> batch = batches_[static_cast<size_t>(position_.batch)];
    position_.examples += static_cast<int64_t>(batch.size());
    if (++position_.batch == static_cast<int64_t>(batches_.size())) {
        position_.batch = 0;
        position_.examples = 0;
        ++position_.epoch;
    }
    return batch;
}

void EpochBatches::restore(const DataPosition& position) {
    HNAS_CHECK(position.fingerprint == position_.fingerprint, "data position: saved for different ", what_,
               " or options (fingerprint ", position.fingerprint, ", this pipeline ", position_.fingerprint, ")");
    HNAS_CHECK(position.window == 0, "data position: ", what_, " has no window ", position.window);
    position_ = position;
    planned_epoch_ = -1;
}

void EpochBatches::plan_epoch() {
    if (planned_epoch_ == position_.epoch) return;
    std::vector<uint64_t> keys(lengths_.begin(), lengths_.end());
    Rng rng = derive_rng(seed_, kEpochStream, static_cast<uint64_t>(position_.epoch));
    batches_ = plan_batches(keys, lengths_, batch_, shuffle_ ? &rng : nullptr);
    HNAS_CHECK(position_.batch < static_cast<int64_t>(batches_.size()), "data position: batch ", position_.batch, " of epoch ",
               position_.epoch, " of ", what_, " does not exist (it has ", batches_.size(), " batches)");
    planned_epoch_ = position_.epoch;
}

}  // namespace hnas::data
