// Data-parallel gradient summation: after each rank's backward pass over its shard of the global batch,
// every parameter's gradient becomes the sum over all ranks.
//
// The sums overlap the backward pass, as PyTorch DDP's do. Gradients are copied into buckets of about
// `bucket_floats` values, and a bucket's sum starts as soon as the backward pass has finished every
// gradient in it (Var::backward's leaf_ready hook) and every bucket before it has started: all ranks
// start the same operations in the same order, whatever order their gradients become final in. The
// sums progress after every node of the pass (the node_done hook); finish() starts what is left, waits
// and writes the sums back.
//
// The first step fills the buckets in reverse parameter order. Its finish() then refills them in the
// order rank 0's pass made the gradients final, sent to every rank, as DDP rebuilds its buckets after
// its first iteration. Parameter order is a poor guess: an encoder-decoder's pass finishes the
// encoder before the query projections of the decoder's first layer, and with buckets in parameter
// order every encoder bucket waited for those (docs/distributed.md measures it).
//
// With bf16 sums each gradient is rounded to bf16 as it is copied into its bucket, and the sums travel
// and add up in bf16 (Communicator::start_sum on bf16 values): half the bytes, for a rounding of every gradient to
// 8 significant bits and of every partial sum (docs/distributed.md measures what it changes).
//
// A parameter that got no gradient on some rank (its shard of the batch did not use it, or the shard
// was empty) contributes zeros there; it ends with a gradient on every rank if any rank had one, and
// with none — so the optimizer leaves it and its moments alone, as in the single-process run — if none
// had one.
#pragma once

#include <string>
#include <unordered_map>
#include <vector>

#include "autograd/variable.h"
#include "distributed/communicator.h"
#include "nn/module.h"

namespace hnas::distributed {

class GradientReducer {
public:
    static constexpr int64_t kBucketFloats = int64_t{1} << 18;  // 1 MB of f32

    GradientReducer(std::vector<nn::NamedParameter> parameters, int64_t bucket_floats, bool bf16_sums);

    // One step's sums: begin() before its last backward pass, which runs with hooks(); then finish().
    // `what` names the operation in timeout messages.
    void begin(Communicator& communicator, const std::string& what);
    BackwardHooks hooks();
    void finish();

    int64_t buckets() const { return static_cast<int64_t>(buckets_.size()); }
    // The parameters (indices into the constructor's list) in the order they fill the buckets.
    std::vector<size_t> bucket_order() const;
    int64_t floats() const { return floats_; }
    // The last bucket holds the parameters whose gradients are final last (the embedding's, used by the
    // forward pass's first op): its sum cannot overlap the backward pass.
    int64_t last_bucket_floats() const { return buckets_.back().floats; }

private:
    struct Bucket {
        std::vector<size_t> parameters;  // indices into parameters_, in the bucket's buffer order
        std::vector<int64_t> offsets;    // where each parameter's gradient sits in the buffer
        int64_t floats = 0;
        std::vector<float> f32;          // the buffer with f32 sums (empty with bf16 sums)
        std::vector<uint16_t> bf16;      // the buffer with bf16 sums (empty with f32 sums)
        size_t pending = 0;              // parameters whose gradient is not final yet
    };

    void fill_buckets(const std::vector<size_t>& order);
    void parameter_ready(size_t index);
    void start_ready_buckets();
    void refill_in_ready_order(Communicator& communicator, bool pass_reported);

    std::vector<nn::NamedParameter> parameters_;
    int64_t bucket_floats_;
    bool bf16_sums_;
    std::unordered_map<const Node*, size_t> index_of_;
    std::vector<size_t> bucket_of_;   // per parameter
    std::vector<size_t> slot_of_;     // per parameter: its position in its bucket
    std::vector<Bucket> buckets_;
    std::vector<char> ready_;         // per parameter, this step
    std::vector<float> has_gradient_; // per parameter: 1 when this rank has a gradient
    Communicator* communicator_ = nullptr;  // between begin() and finish()
    size_t next_bucket_ = 0;          // the first bucket whose sum has not started
    int64_t floats_ = 0;
    std::vector<size_t> ready_order_; // this step's parameters in the order they became final, until refilled
    bool refilled_ = false;           // the buckets follow rank 0's ready order
};

}  // namespace hnas::distributed
