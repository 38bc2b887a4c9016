// Data-parallel gradient summation: after each rank's backward pass over its shard of the global batch,
// every parameter's gradient becomes the sum over all ranks.
//
// Gradients are copied into buckets of about `bucket_floats` values (in parameter order) and every
// bucket is summed as its own non-blocking all-reduce, all in flight at once, so large models pipeline
// the transfers of one bucket with the reduction of the next. The reduction starts after the backward
// pass: hnas's tape has no hook for "this parameter's gradient is final", so overlapping it with the
// backward pass is not done (docs/distributed.md gives the measured share of the step it costs).
//
// A parameter that got no gradient on some rank (its shard of the batch did not use it, or the shard
// was empty) contributes zeros there; it ends with a gradient on every rank if any rank had one, and
// with none — so the optimizer leaves it and its moments alone, as in the single-process run — if none
// had one.
#pragma once

#include <string>
#include <vector>

#include "distributed/communicator.h"
#include "nn/module.h"

namespace hnas::distributed {

class GradientReducer {
public:
    explicit GradientReducer(std::vector<nn::NamedParameter> parameters, int64_t bucket_floats = int64_t{1} << 20);

    // Sums the parameters' gradients over all ranks; `what` names the operation in timeout messages.
    void sum(Communicator& communicator, const std::string& what);

    int64_t buckets() const { return static_cast<int64_t>(buckets_.size()); }

private:
    std::vector<nn::NamedParameter> parameters_;
    std::vector<std::vector<size_t>> buckets_;  // parameter indices of each bucket
    std::vector<std::vector<float>> buffers_;   // one per bucket
    std::vector<float> has_gradient_;           // per parameter: 1 when this rank has a gradient
};

}  // namespace hnas::distributed
