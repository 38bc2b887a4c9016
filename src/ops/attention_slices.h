// The fused attention kernels work one (b, h) slice of (Lq, Lk) scores at a time (internal to ops):
// which entries of a slice are allowed, a copy of a slice with -inf where they are not, per-thread
// scratch, the loop over slices, and the sum of per-slice parameter gradients per head.
// Every log-normalizer checks for an empty set first (a row or column with nothing allowed keeps
// normalizer 0 and stays -inf), so -inf − -inf never happens and exp(-inf) = 0 zeroes masked weights.
#pragma once

#include <algorithm>
#include <cstdint>
#include <limits>
#include <vector>

#include "backend/kernels.h"
#include "backend/matmul.h"
#include "ops/ops.h"

namespace hnas::ops {

inline constexpr float kMinusInfinity = -std::numeric_limits<float>::infinity();

// Checks scores against the mask at the op's boundary; errors name `op` and both shapes.
AttentionDims check_attention_shapes(const Var& scores, const AttentionMask& mask, const char* op);
// The same for scores of dimensions d that no tensor holds (blocked_attention's).
void check_attention_mask(const AttentionDims& d, const AttentionMask& mask, const char* op);

// Which entries of batch element b's (Lq, Lk) slices are allowed.
struct SliceMask {
    const float* key_valid;    // null: all real
    const float* query_valid;  // null: all real
    bool causal;
    int64_t query_offset;

    SliceMask(const AttentionMask& mask, const AttentionDims& d, int64_t b)
        : key_valid(mask.key_valid.defined() ? mask.key_valid.data() + b * d.keys : nullptr),
          query_valid(mask.query_valid.defined() ? mask.query_valid.data() + b * d.queries : nullptr),
          causal(mask.causal),
          query_offset(mask.query_offset) {}

    bool query_real(int64_t i) const { return !query_valid || query_valid[i] > 0.5f; }
    bool key_real(int64_t j) const { return !key_valid || key_valid[j] > 0.5f; }
    // Keys at or beyond this index are hidden from query i by causality.
    int64_t visible_end(int64_t i, int64_t keys) const {
        return causal ? std::clamp<int64_t>(i + query_offset + 1, 0, keys) : keys;
    }
    bool allowed(int64_t i, int64_t j) const {
        return query_real(i) && key_real(j) && (!causal || j <= i + query_offset);
    }
};

// Copies a slice's scores into `out`, putting -inf where not allowed.
void load_masked(const float* scores, const SliceMask& mask, int64_t queries, int64_t keys, float* out);

// Buffers a kernel needs per slice, held per thread and reused across its slices.
struct SliceScratch {
    std::vector<float> log_values, exp_values, rebuilt, gradient, per_key, carry, prefix;
    // `buffer` with room for n values (allocated at the thread's first slice only).
    static float* sized(std::vector<float>& buffer, int64_t n) {
        if (buffer.size() < static_cast<size_t>(n)) buffer.resize(static_cast<size_t>(n));
        return buffer.data();
    }
};

// body(s, scratch) for every slice s = b·H + h, in parallel when the scores are large enough.
template <class Body>
void for_each_slice(const AttentionDims& d, Body&& body) {
#pragma omp parallel if (d.slices() * d.slice() >= kernels::kParallelGrain)
    {
        SliceScratch scratch;
#pragma omp for schedule(static)
        for (int64_t s = 0; s < d.slices(); ++s) body(s, scratch);
    }
}

// A normalization's kernels for one (b, h) slice at a time, holding what its forward keeps for its
// backward: one implementation serves normalize_slices (a whole scores tensor, the kinds' normalize())
// and blocked_attention (block by block while the block's scores are in cache). Calls for different
// slices may run on different threads at once.
class SliceNormalization {
public:
    explicit SliceNormalization(const AttentionDims& d) : dims(d) {}
    virtual ~SliceNormalization() = default;
    // Slice s's weights from its scores S (Lq·Lk values, not kept: copy what the backward needs),
    // into `A`.
    virtual void forward(int64_t s, const float* S, const SliceMask& mask, float* A, SliceScratch& scratch) = 0;
    // Slice s's weights again, from what forward() kept: a pointer to them, or computed into `A` (which
    // is then returned).
    virtual const float* weights(int64_t s, const SliceMask& mask, float* A, SliceScratch& scratch) = 0;
    // Slice s's dS (written) from g = dLoss/dA, and its terms of the parameters' gradients; dS null:
    // those terms alone.
    virtual void backward(int64_t s, const float* g, const SliceMask& mask, float* dS, SliceScratch& scratch) = 0;
    // The parameters' gradients from every slice's terms, into the sink's inputs first, first + 1, …
    virtual void write_parameter_gradients(GradSink& /*sink*/, size_t /*first*/) const {}

    const AttentionDims dims;
};

// Input `input`'s gradient when it is wanted (undefined otherwise), and whether to add into it. Its
// values are taken once (each data() call would mark a bf16 copy stale again).
struct WantedGradient {
    Tensor grad;
    bool accumulate = false;
    float* values = nullptr;
    uint16_t* rounded = nullptr;  // the bf16 copy to fill, with_operand_copy() under bf16 only

    // For a gradient that feeds products (the scores' feeds dQ and dK): its bf16 copy, written slice by
    // slice by round_slice() once each is final, so that no product converts it.
    WantedGradient& with_operand_copy() {
        if (grad.defined()) rounded = backend::operand_copy_to_fill(grad);
        return *this;
    }
    float* slice(int64_t s, int64_t n) const { return values ? values + s * n : nullptr; }
    void round_slice(int64_t s, int64_t n) const {
        if (rounded != nullptr) kernels::round_row_to_bf16(values + s * n, rounded + s * n, n);
    }
};
WantedGradient wanted_gradient(GradSink& sink, size_t input);

// A per-head parameter's gradient from per-slice partial sums, reduced over the batch in a fixed order
// (deterministic across thread counts).
void add_head_gradient(GradSink& sink, size_t input, const std::vector<double>& per_slice, const AttentionDims& d);

}  // namespace hnas::ops
