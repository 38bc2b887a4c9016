// normalize_attention: exp of the scores after a sequence of log-normalization steps over keys,
// queries or query prefixes — LNAS {keys}, DNAS {queries, keys} (paper 000, Eq. 6-8), Sinkhorn-k
// (k × {queries, keys}), causal DNAS {queries_prefix, keys}. The kinds' composed definitions, which a
// test holds equal to this kernel, are their reference() (src/nn/attention_kinds/).
#include <algorithm>
#include <cmath>

#include "ops/attention_slices.h"
#include "ops/log_normalizers.h"

namespace hnas::ops {

namespace {

// Every step's normalizers for every slice: step t holds (slices, Lq), (slices, Lk) or (slices, Lq·Lk).
struct StepNormalizers {
    std::vector<Tensor> per_step;

    StepNormalizers(const std::vector<NormalizeAxis>& steps, const AttentionDims& d) {
        for (NormalizeAxis axis : steps) {
            const int64_t count = axis == NormalizeAxis::keys ? d.queries : axis == NormalizeAxis::queries ? d.keys : d.slice();
            per_step.push_back(Tensor::empty({d.slices(), count}));
        }
    }
    float* at(size_t t, int64_t s) { return per_step[t].data() + s * per_step[t].dim(1); }
    const float* at(size_t t, int64_t s) const { return per_step[t].data() + s * per_step[t].dim(1); }
};

// Only Sinkhorn with k > 1 has steps whose exp(L) cannot be had from the weights: its backward pass
// rebuilds them from the final log values, which the forward pass keeps for it alone.
bool keeps_final_log(const std::vector<NormalizeAxis>& steps) { return steps.size() > 2; }

// The normalizer a step subtracted at entry (i, j): per query, per key or per entry.
float normalizer_at(NormalizeAxis axis, const float* c, int64_t i, int64_t j, int64_t keys) {
    return axis == NormalizeAxis::keys ? c[i] : axis == NormalizeAxis::queries ? c[j] : c[i * keys + j];
}

void step_adjoint(NormalizeAxis axis, const float* P, const float* c, const SliceMask& allowed, const AttentionDims& d,
                  float* G, SliceScratch& scratch) {
    switch (axis) {
        case NormalizeAxis::keys: normalize_rows_adjoint(P, d, G); break;
        case NormalizeAxis::queries: normalize_columns_adjoint(P, d, G, SliceScratch::sized(scratch.per_key, d.keys)); break;
        case NormalizeAxis::queries_prefix:
            normalize_column_prefixes_adjoint(P, c, allowed, d, G, SliceScratch::sized(scratch.carry, 2 * d.keys));
            break;
    }
}

// One slice: L = S with -inf where not allowed; L −= c_t for every step t but the last, whose output
// gives A = exp(L) directly. L is left holding the final log values when keeps_final_log(steps).
void normalize_attention_forward(const float* S, const SliceMask& mask, const AttentionDims& d,
                                 const std::vector<NormalizeAxis>& steps, StepNormalizers& c, int64_t s, float* L,
                                 float* A, SliceScratch& scratch) {
    const size_t last = steps.size() - 1;
    float* total = SliceScratch::sized(scratch.per_key, d.keys);
    load_masked(S, mask, d.queries, d.keys, L);
    // A query step right before a last key step is not subtracted in a sweep of its own: the last step
    // subtracts it row by row as it goes.
    const bool fold_columns = last > 0 && steps[last - 1] == NormalizeAxis::queries && steps[last] == NormalizeAxis::keys;
    for (size_t t = 0; t < last; ++t) {
        switch (steps[t]) {
            case NormalizeAxis::keys: normalize_rows(L, d, c.at(t, s)); break;
            case NormalizeAxis::queries:
                column_logsumexp(L, d, c.at(t, s), total);
                if (!(fold_columns && t + 1 == last)) subtract_columns(L, d, c.at(t, s));
                break;
            case NormalizeAxis::queries_prefix: normalize_column_prefixes(L, d, c.at(t, s), scratch.prefix); break;
        }
    }
    float* c_last = c.at(last, s);
    switch (steps[last]) {
        case NormalizeAxis::keys:
            for (int64_t i = 0; i < d.queries; ++i) {
                float* row = L + i * d.keys;
                if (fold_columns) {
                    const float* columns = c.at(last - 1, s);
#pragma omp simd
                    for (int64_t j = 0; j < d.keys; ++j) row[j] -= columns[j];
                }
                c_last[i] = softmax_row(row, d.keys, A + i * d.keys);  // A = exp(L − c_last)
                if (!keeps_final_log(steps)) continue;
#pragma omp simd
                for (int64_t j = 0; j < d.keys; ++j) row[j] -= c_last[i];
            }
            return;
        case NormalizeAxis::queries:
            column_logsumexp(L, d, c_last, total);
            subtract_columns(L, d, c_last);
            break;
        case NormalizeAxis::queries_prefix: normalize_column_prefixes(L, d, c_last, scratch.prefix); break;
    }
#pragma omp simd
    for (int64_t e = 0; e < d.slice(); ++e) A[e] = kernels::fast_exp(L[e]);
}

// One slice, G = dLoss/dS from g = dLoss/dA, undoing the steps last to first. L_final (the forward's
// final log values) is needed only with more than two steps; the last two steps' exp(L) come from A.
void normalize_attention_backward(const float* g, const float* A, const float* L_final, const StepNormalizers& c,
                                  int64_t s, const std::vector<NormalizeAxis>& steps, const SliceMask& allowed,
                                  const AttentionDims& d, float* G, SliceScratch& scratch) {
    const size_t last = steps.size() - 1;
    const float* c_last = c.at(last, s);
    // forward: A = exp(L_last − c_last), so dL_last = dA ⊙ A, then the last step's adjoint; over keys
    // the two are the softmax gradient A ⊙ (g − Σ_j g ⊙ A).
    if (steps[last] == NormalizeAxis::keys) {
        softmax_rows_adjoint(A, g, d, G);
    } else {
#pragma omp simd
        for (int64_t e = 0; e < d.slice(); ++e) G[e] = g[e] * A[e];
        step_adjoint(steps[last], A, c_last, allowed, d, G, scratch);
    }
    if (last == 0) return;
    float* P = SliceScratch::sized(scratch.exp_values, d.slice());
    float* W = L_final ? SliceScratch::sized(scratch.rebuilt, d.slice()) : nullptr;
    if (W) std::copy(L_final, L_final + d.slice(), W);
    auto undo = [&](size_t t) {  // forward: L_out = L_in − c_t, so W becomes the log values step t began from
        const float* c_t = c.at(t, s);
        const NormalizeAxis axis = steps[t];
        for (int64_t i = 0; i < d.queries; ++i)
#pragma omp simd
            for (int64_t j = 0; j < d.keys; ++j) W[i * d.keys + j] += normalizer_at(axis, c_t, i, j, d.keys);
    };
    for (size_t t = last; t-- > 0;) {
        if (t + 1 == last) {
            // forward: L_last = L_t − c_t, A = exp(L_last − c_last): so P = exp(L_last) = A ⊙ exp(c_last),
            // one exp per row or column; c_last ≤ log Lk or log Lq (it normalizes values ≤ 0), so P is finite.
            if (steps[last] == NormalizeAxis::keys) {
                for (int64_t i = 0; i < d.queries; ++i) {
                    const float scale = std::exp(c_last[i]);
#pragma omp simd
                    for (int64_t j = 0; j < d.keys; ++j) P[i * d.keys + j] = A[i * d.keys + j] * scale;
                }
            } else if (steps[last] == NormalizeAxis::queries) {
                float* column = SliceScratch::sized(scratch.per_key, d.keys);
                for (int64_t j = 0; j < d.keys; ++j) column[j] = std::exp(c_last[j]);
                for (int64_t i = 0; i < d.queries; ++i)
#pragma omp simd
                    for (int64_t j = 0; j < d.keys; ++j) P[i * d.keys + j] = A[i * d.keys + j] * column[j];
            } else {
#pragma omp simd
                for (int64_t e = 0; e < d.slice(); ++e) P[e] = A[e] * kernels::fast_exp(c_last[e]);
            }
            if (W) undo(last);
        } else {
            // forward: L_{t+1} = L_t − c_t (earlier steps, Sinkhorn only): rebuilt from the final values.
            undo(t + 1);
#pragma omp simd
            for (int64_t e = 0; e < d.slice(); ++e) P[e] = kernels::fast_exp(W[e]);
        }
        step_adjoint(steps[t], P, c.at(t, s), allowed, d, G, scratch);
    }
}

// The steps' kernels slice by slice: each slice's normalizers and weights (and with more than two
// steps its final log values) kept for the backward; the weights where the caller keeps them, if it does.
class StepNormalization final : public SliceNormalization {
public:
    StepNormalization(const AttentionDims& d, std::vector<NormalizeAxis> steps, const KeptAttention& kept)
        : SliceNormalization(d),
          steps_(std::move(steps)),
          normalizers_(steps_, d),
          kept_weights_(kept.weights.defined() ? kept.weights : Tensor::empty({d.slices(), d.slice()})),
          log_values_(keeps_final_log(steps_) ? Tensor::empty({d.slices(), d.slice()}) : Tensor()),
          weights_(kept_weights_.data()),
          log_(log_values_.defined() ? log_values_.data() : nullptr) {}

    void forward(int64_t s, const float* S, const SliceMask& mask, float* A, SliceScratch& scratch) override {
        const int64_t n = dims.slice();
        float* L = log_ ? log_ + s * n : SliceScratch::sized(scratch.log_values, n);
        normalize_attention_forward(S, mask, dims, steps_, normalizers_, s, L, A, scratch);
        if (A != weights_ + s * n) std::copy_n(A, n, weights_ + s * n);
    }
    const float* weights(int64_t s, const SliceMask&, float*, SliceScratch&) override { return weights_ + s * dims.slice(); }
    void backward(int64_t s, const float* g, const SliceMask& mask, float* dS, SliceScratch& scratch) override {
        if (dS == nullptr) return;
        const int64_t n = dims.slice();
        normalize_attention_backward(g, weights_ + s * n, log_ ? log_ + s * n : nullptr, normalizers_, s, steps_, mask, dims,
                                     dS, scratch);
    }

private:
    std::vector<NormalizeAxis> steps_;
    StepNormalizers normalizers_;
    Tensor kept_weights_, log_values_;  // the caller's weights, or a copy
    float* weights_;
    float* log_;
};

}  // namespace

SliceNormalizer step_normalizer(const std::vector<NormalizeAxis>& steps) {
    HNAS_CHECK(!steps.empty(), "normalize_attention: no normalization steps");
    return {[steps](const AttentionDims& d, const KeptAttention& kept) -> std::unique_ptr<SliceNormalization> {
                return std::make_unique<StepNormalization>(d, steps, kept);
            },
            {}};
}

Var normalize_attention(const Var& scores, const AttentionMask& mask, const std::vector<NormalizeAxis>& steps) {
    return normalize_slices("normalize_attention", scores, mask, step_normalizer(steps));
}

}  // namespace hnas::ops
