// The dropout mask as a pure function of one RNG draw (`key`) and the element index, shared by the
// dropout op and the kernels that fuse dropout into a neighbour (residual_layer_norm): the mask is
// recomputed in backward instead of stored.
#pragma once

#include <cstdint>

#include "base/hash.h"
#include "base/rng.h"

namespace hnas::ops {

// 0 with probability p, else keep_scale = 1/(1-p) (inverted dropout).
inline float dropout_mask(uint64_t key, int64_t index, float p, float keep_scale) {
    return unit_float(mix64(key + static_cast<uint64_t>(index))) < p ? 0.0f : keep_scale;
}

}  // namespace hnas::ops
