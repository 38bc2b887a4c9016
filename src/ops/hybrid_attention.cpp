// hybrid_attention: HNAS in one kernel (paper 004, Alg. 1), u[h]·DNAS(S) + (1 − u[h])·LNAS(S) with
// u = sigmoid(θ), in one pass over the masked scores; the backward pass needs only the two weight
// matrices and DNAS's row normalizers. Its composed definition is the hnas kind's reference().
#include <cmath>

#include "ops/attention_slices.h"
#include "ops/log_normalizers.h"

namespace hnas::ops {

namespace {

// One slice with mixing weight w = u[h]: A_l, A_d and out = w·A_d + (1 − w)·A_l, and r, the row
// normalizers of DNAS's key step: exp(L1) = A_d · exp(r) rebuilds its first step's output later.
void hybrid_attention_forward(const float* S, const SliceMask& mask, const AttentionDims& d, float w, float* A_d,
                              float* A_l, float* out, float* r, SliceScratch& scratch) {
    float* L = SliceScratch::sized(scratch.log_values, d.slice());
    float* column = SliceScratch::sized(scratch.per_key, d.keys);
    float* total = SliceScratch::sized(scratch.carry, d.keys);
    load_masked(S, mask, d.queries, d.keys, L);
    column_logsumexp(L, d, column, total);  // DNAS's query step (paper 000, Eq. 7), first: LNAS leaves L unchanged
    for (int64_t i = 0; i < d.queries; ++i) {
        float* row = L + i * d.keys;
        softmax_row(row, d.keys, A_l + i * d.keys);  // A_l = softmax_keys(S) (Eq. 3)
#pragma omp simd
        for (int64_t j = 0; j < d.keys; ++j) row[j] -= column[j];  // L1 = S − c
        r[i] = softmax_row(row, d.keys, A_d + i * d.keys);  // A_d = softmax_keys(L1) (paper 000, Eq. 8)
#pragma omp simd
        for (int64_t j = 0; j < d.keys; ++j) out[i * d.keys + j] = w * A_d[i * d.keys + j] + (1.0f - w) * A_l[i * d.keys + j];
    }
}

// One slice: dS into `dS` (null: not wanted) and the slice's part of Σ g ⊙ (A_d − A_l), from which
// dθ = u(1 − u) Σ g ⊙ (A_d − A_l) follows.
double hybrid_attention_backward(const float* g, const float* A_d, const float* A_l, const float* r, float w,
                                 const AttentionDims& d, float* dS, SliceScratch& scratch) {
    float* column = SliceScratch::sized(scratch.per_key, d.keys);
    std::fill(column, column + d.keys, 0.0f);
    double mix = 0.0;
    for (int64_t i = 0; i < d.queries; ++i) {
        const int64_t row = i * d.keys;
        float dot_l = 0.0f, dot_d = 0.0f;
#pragma omp simd reduction(+ : dot_l, dot_d)
        for (int64_t j = 0; j < d.keys; ++j) {
            dot_l += g[row + j] * A_l[row + j];
            dot_d += g[row + j] * A_d[row + j];
        }
        // forward: out = w·A_d + (1 − w)·A_l
        mix += static_cast<double>(dot_d) - static_cast<double>(dot_l);
        if (!dS) continue;
        // forward: A_l = softmax_keys(S), so dS = (1 − w)·A_l ⊙ (g − Σ_j g A_l);
        // forward: A_d = softmax_keys(L1), so dL1 = w·A_d ⊙ (g − Σ_j g A_d), summed per column below.
#pragma omp simd
        for (int64_t j = 0; j < d.keys; ++j) {
            const float dL1 = w * A_d[row + j] * (g[row + j] - dot_d);
            column[j] += dL1;
            dS[row + j] = (1.0f - w) * A_l[row + j] * (g[row + j] - dot_l) + dL1;
        }
    }
    if (!dS) return mix;
    // forward: L1 = S − logsumexp_i S (per column), so dS = dL1 − exp(L1) ⊙ Σ_i dL1, exp(L1) = A_d · exp(r_i).
    for (int64_t i = 0; i < d.queries; ++i) {
        const float scale = std::exp(r[i]);
#pragma omp simd
        for (int64_t j = 0; j < d.keys; ++j) dS[i * d.keys + j] -= A_d[i * d.keys + j] * scale * column[j];
    }
    return mix;
}

// HNAS's kernels slice by slice: each slice's DNAS and LNAS weights and DNAS's row normalizers kept for
// the backward, with its term of dθ.
class HybridNormalization final : public SliceNormalization {
public:
    HybridNormalization(const AttentionDims& d, const Tensor& theta)
        : SliceNormalization(d),
          u_(static_cast<size_t>(d.heads)),
          doubly_(Tensor::empty({d.slices(), d.slice()})),
          softmax_(Tensor::empty({d.slices(), d.slice()})),
          row_normalizers_(Tensor::empty({d.slices(), d.queries})),
          dtheta_(static_cast<size_t>(d.slices())),
          A_d_(doubly_.data()),
          A_l_(softmax_.data()),
          r_(row_normalizers_.data()) {
        for (int64_t h = 0; h < d.heads; ++h) u_[static_cast<size_t>(h)] = 1.0f / (1.0f + std::exp(-theta.data()[h]));
    }

    void forward(int64_t s, const float* S, const SliceMask& mask, float* A, SliceScratch& scratch) override {
        const int64_t n = dims.slice();
        hybrid_attention_forward(S, mask, dims, u(s), A_d_ + s * n, A_l_ + s * n, A, r_ + s * dims.queries, scratch);
    }
    const float* weights(int64_t s, const SliceMask&, float* A, SliceScratch&) override {
        const int64_t n = dims.slice();
        const float w = u(s), *A_d = A_d_ + s * n, *A_l = A_l_ + s * n;
#pragma omp simd
        for (int64_t e = 0; e < n; ++e) A[e] = w * A_d[e] + (1.0f - w) * A_l[e];
        return A;
    }
    void backward(int64_t s, const float* g, const SliceMask&, float* dS, SliceScratch& scratch) override {
        const int64_t n = dims.slice();
        const float w = u(s);
        const double mix = hybrid_attention_backward(g, A_d_ + s * n, A_l_ + s * n, r_ + s * dims.queries, w, dims, dS, scratch);
        dtheta_[static_cast<size_t>(s)] = mix * w * (1.0f - w);  // forward: u = sigmoid(θ)
    }
    void write_parameter_gradients(GradSink& sink, size_t first) const override { add_head_gradient(sink, first, dtheta_, dims); }

private:
    float u(int64_t s) const { return u_[static_cast<size_t>(s % dims.heads)]; }

    std::vector<float> u_;
    Tensor doubly_, softmax_, row_normalizers_;
    std::vector<double> dtheta_;
    float *A_d_, *A_l_, *r_;
};

}  // namespace

SliceNormalizer hybrid_normalizer(const Var& theta) {
    return {[theta = theta.value()](const AttentionDims& d, const KeptAttention&) -> std::unique_ptr<SliceNormalization> {
                HNAS_CHECK(theta.shape() == Shape{d.heads}, "hybrid_attention: theta ", shape_str(theta.shape()),
                           " must be (", d.heads, ")");
                return std::make_unique<HybridNormalization>(d, theta);
            },
            {theta}};
}

Var hybrid_attention(const Var& scores, const Var& theta, const AttentionMask& mask) {
    return normalize_slices("hybrid_attention", scores, mask, hybrid_normalizer(theta));
}

}  // namespace hnas::ops
