// unnormalized_attention: paper 002's NON (§4), the scores themselves as weights, scaled by 1/√n for a
// query with n allowed keys, 0 where not allowed. Its composed definition is the non kind's reference().
#include <algorithm>
#include <cmath>
#include <utility>

#include "ops/attention_slices.h"

namespace hnas::ops {

namespace {

// NON slice by slice: the weights are the scores times a per-query factor, so the backward needs the
// factors alone, and the weights again need the scores (where the caller keeps them, or a copy).
class UnnormalizedAttention final : public SliceNormalization {
public:
    UnnormalizedAttention(const AttentionDims& d, const KeptAttention& kept)
        : SliceNormalization(d),
          kept_scores_(kept.scores.defined() ? kept.scores : Tensor::empty({d.slices(), d.slice()})),
          own_(kept.scores.defined() ? nullptr : kept_scores_.data()),
          scores_(std::as_const(kept_scores_).data()) {}

    void forward(int64_t s, const float* S, const SliceMask& mask, float* A, SliceScratch&) override {
        const int64_t n = dims.slice();
        if (own_ && S != own_ + s * n) std::copy_n(S, n, own_ + s * n);
        scale_allowed(S, mask, A);
    }
    const float* weights(int64_t s, const SliceMask& mask, float* A, SliceScratch&) override {
        scale_allowed(scores_ + s * dims.slice(), mask, A);
        return A;
    }
    // forward: A = S · 1/√n over allowed entries, so dS = g · 1/√n there and 0 elsewhere.
    void backward(int64_t, const float* g, const SliceMask& mask, float* dS, SliceScratch&) override {
        if (dS != nullptr) scale_allowed(g, mask, dS);
    }

private:
    // out = in · 1/√n at each query's n allowed keys, 0 elsewhere (and for a query with none).
    void scale_allowed(const float* in, const SliceMask& mask, float* out) const {
        for (int64_t i = 0; i < dims.queries; ++i) {
            int64_t allowed = 0;
            for (int64_t j = 0; j < dims.keys; ++j) allowed += mask.allowed(i, j) ? 1 : 0;
            const float scale = allowed > 0 ? 1.0f / std::sqrt(static_cast<float>(allowed)) : 0.0f;
            for (int64_t j = 0; j < dims.keys; ++j) {
                out[i * dims.keys + j] = mask.allowed(i, j) ? in[i * dims.keys + j] * scale : 0.0f;
            }
        }
    }

    Tensor kept_scores_;  // the caller's scores, or a copy
    float* own_;          // the copy's values, when it is one
    const float* scores_;
};

}  // namespace

SliceNormalizer unnormalized_normalizer() {
    return {[](const AttentionDims& d, const KeptAttention& kept) -> std::unique_ptr<SliceNormalization> {
                return std::make_unique<UnnormalizedAttention>(d, kept);
            },
            {}};
}

Var unnormalized_attention(const Var& scores, const AttentionMask& mask) {
    return normalize_slices("unnormalized_attention", scores, mask, unnormalized_normalizer());
}

}  // namespace hnas::ops
