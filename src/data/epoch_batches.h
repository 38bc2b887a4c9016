// The batches of a dataset held in memory (fine-tuning examples, SQuAD windows): every epoch is cut
// by plan_batches (length bucketing; shuffled from a stream per epoch when training, in length order
// otherwise), and the position — epoch and batch — is a DataPosition, so a resumed run continues with
// exactly the batches an uninterrupted one gets.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "data/batching.h"

namespace hnas::data {

class EpochBatches {
public:
    // lengths: of each example in tokens. fingerprint: of the data and every option that shapes the
    // examples (restore() refuses a position saved for another); `what` names the data in errors.
    EpochBatches(std::vector<int64_t> lengths, BatchOptions batch, bool shuffle, uint64_t seed, int64_t epochs,
                 uint64_t fingerprint, std::string what);

    // The example indices of the next batch, crossing epochs; nullopt after `epochs` epochs (0: never).
    std::optional<std::vector<uint32_t>> next();
    DataPosition position() const { return position_; }
    void restore(const DataPosition& position);
    int64_t examples() const { return static_cast<int64_t>(lengths_.size()); }

private:
    void plan_epoch();

    std::vector<int64_t> lengths_;
    BatchOptions batch_;
    bool shuffle_;
    uint64_t seed_;
    int64_t epochs_;
    std::string what_;
    DataPosition position_;
    int64_t planned_epoch_ = -1;
    std::vector<std::vector<uint32_t>> batches_;
};

}  // namespace hnas::data
