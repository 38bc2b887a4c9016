// Dropout's keep factors (internal to ops): each element's a pure function of the op's key and the
// element's index, so the ops that fuse dropout with what follows it (dropout.cpp, layer_norm.cpp)
// draw the same mask, whichever rows or blocks their threads take.
#pragma once

#include <algorithm>
#include <cstdint>

#include "backend/kernels.h"
#include "base/hash.h"
#include "base/rng.h"
#include "base/check.h"

namespace hnas::ops {

struct KeepFactors {
    uint64_t key;
    float p, keep_scale;

    // One key drawn from rng, as every dropout op draws it.
    static KeepFactors draw(float p, Rng& rng) { return {rng.next_u64(), p, 1.0f / (1.0f - p)}; }

    // factor[j] for the elements begin … begin + count − 1: 0 with probability p, else 1/(1−p).
    void fill(int64_t begin, int64_t count, float* factor) const {
        const uint64_t first = key + static_cast<uint64_t>(begin);
        const float drop = p, scale = keep_scale;
#pragma omp simd
        for (int64_t j = 0; j < count; ++j) {
            factor[j] = unit_float(mix64(first + static_cast<uint64_t>(j))) < drop ? 0.0f : scale;
        }
    }
};

inline void check_dropout_probability(const char* op, float p) {
    HNAS_CHECK(p >= 0.0f && p < 1.0f, op, ": probability must be in [0, 1), got ", p);
}

}  // namespace hnas::ops
