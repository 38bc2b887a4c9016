// The preference prior over positions (paper 003, §7, Eq. 19-20): T5's learned relative-position
// bias, one scalar per head per bucket of the relative distance j − i, added to the scores before any
// normalization. Buckets are exact for short distances and logarithmic up to max_distance; encoders
// and cross-attention use bidirectional buckets, causal self-attention buckets of past distances only.
#pragma once

#include "nn/module.h"

namespace hnas::nn {

struct RelativePositionOptions {
    int64_t buckets = 32;
    int64_t max_distance = 128;
    bool bidirectional = true;
};

// T5's bucket of relative position (key − query).
int64_t relative_position_bucket(int64_t relative, const RelativePositionOptions& options);

class RelativePositionBias : public Module {
public:
    RelativePositionBias(int64_t heads, const RelativePositionOptions& options);
    // The bias for queries at positions query_offset.. and keys at 0..: (1, H, Lq, Lk).
    Var forward(int64_t queries, int64_t keys, int64_t query_offset = 0) const;

private:
    RelativePositionOptions options_;
    int64_t heads_;
    Var table_;  // (buckets, H); zeros: the prior starts uniform, i.e. standard attention
};

}  // namespace hnas::nn
