// Fused attention normalizations: alternating log-space normalizations over keys and queries (LNAS,
// DNAS, Sinkhorn-k, causal DNAS), NAP's standardization, and HNAS's per-head mixture of DNAS and LNAS.
//
// Masking: each (b, h) slice is copied into a work buffer in which entries that are not allowed hold
// -inf; every logsumexp checks for an empty set first (a row or column with nothing allowed keeps
// normalizer 0 and stays -inf), so -inf - -inf never happens and exp(-inf) = 0 zeroes masked weights.
#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "backend/kernels.h"
#include "ops/ops.h"

namespace hnas::ops {

namespace {

constexpr float kMinusInfinity = -std::numeric_limits<float>::infinity();

struct Dims {
    int64_t batch, heads, queries, keys;
    int64_t slice() const { return queries * keys; }
};

Dims check_scores(const Var& scores, const AttentionMask& mask, const char* op) {
    HNAS_CHECK(scores.rank() == 4, op, ": scores must be (B, H, Lq, Lk), got ", shape_str(scores.shape()));
    const Dims d{scores.dim(0), scores.dim(1), scores.dim(2), scores.dim(3)};
    HNAS_CHECK(!mask.key_valid.defined() || (mask.key_valid.shape() == Shape{d.batch, d.keys}), op, ": key_valid ",
               shape_str(mask.key_valid.shape()), " does not match scores ", shape_str(scores.shape()));
    HNAS_CHECK(!mask.query_valid.defined() || (mask.query_valid.shape() == Shape{d.batch, d.queries}), op,
               ": query_valid ", shape_str(mask.query_valid.shape()), " does not match scores ",
               shape_str(scores.shape()));
    return d;
}

// Which entries of batch element b's (Lq, Lk) slices are allowed.
struct SliceMask {
    const float* key_valid;    // null: all real
    const float* query_valid;  // null: all real
    bool causal;
    int64_t query_offset;

    SliceMask(const AttentionMask& mask, const Dims& d, int64_t b)
        : key_valid(mask.key_valid.defined() ? mask.key_valid.data() + b * d.keys : nullptr),
          query_valid(mask.query_valid.defined() ? mask.query_valid.data() + b * d.queries : nullptr),
          causal(mask.causal),
          query_offset(mask.query_offset) {}

    bool query_real(int64_t i) const { return !query_valid || query_valid[i] > 0.5f; }
    // Keys at or beyond this index are hidden from query i by causality.
    int64_t visible_end(int64_t i, int64_t keys) const {
        return causal ? std::clamp<int64_t>(i + query_offset + 1, 0, keys) : keys;
    }
    bool allowed(int64_t i, int64_t j) const {
        return query_real(i) && (!key_valid || key_valid[j] > 0.5f) && (!causal || j <= i + query_offset);
    }
};

// Copies a slice's scores, putting -inf where not allowed (row by row, so the loop vectorizes).
void load_masked(const float* scores, const SliceMask& mask, int64_t queries, int64_t keys, float* out) {
    for (int64_t i = 0; i < queries; ++i) {
        const float* in = scores + i * keys;
        float* row = out + i * keys;
        const int64_t end = mask.query_real(i) ? mask.visible_end(i, keys) : 0;
        if (mask.key_valid) {
            for (int64_t j = 0; j < end; ++j) row[j] = mask.key_valid[j] > 0.5f ? in[j] : kMinusInfinity;
        } else {
            for (int64_t j = 0; j < end; ++j) row[j] = in[j];
        }
        for (int64_t j = end; j < keys; ++j) row[j] = kMinusInfinity;
    }
}

// In place: each row of L (Lq, Lk) minus its logsumexp; the normalizers go to `normalizer` (Lq).
void normalize_rows(float* L, int64_t queries, int64_t keys, float* normalizer) {
    for (int64_t i = 0; i < queries; ++i) {
        float* row = L + i * keys;
        float top = kMinusInfinity;
#pragma omp simd reduction(max : top)
        for (int64_t j = 0; j < keys; ++j) top = std::max(top, row[j]);
        if (top == kMinusInfinity) {
            normalizer[i] = 0.0f;
            continue;
        }
        float total = 0.0f;
#pragma omp simd reduction(+ : total)
        for (int64_t j = 0; j < keys; ++j) total += kernels::fast_exp(row[j] - top);
        const float c = top + std::log(total);
#pragma omp simd
        for (int64_t j = 0; j < keys; ++j) row[j] -= c;
        normalizer[i] = c;
    }
}

// In place: each column of L minus its logsumexp over queries; normalizers to `normalizer` (Lk).
void normalize_columns(float* L, int64_t queries, int64_t keys, float* normalizer, std::vector<float>& scratch) {
    scratch.assign(static_cast<size_t>(keys), 0.0f);
    float* total = scratch.data();
    for (int64_t j = 0; j < keys; ++j) normalizer[j] = kMinusInfinity;  // the column maxima first
    for (int64_t i = 0; i < queries; ++i)
#pragma omp simd
        for (int64_t j = 0; j < keys; ++j) normalizer[j] = std::max(normalizer[j], L[i * keys + j]);
    for (int64_t i = 0; i < queries; ++i)
#pragma omp simd
        for (int64_t j = 0; j < keys; ++j)
            total[j] += normalizer[j] == kMinusInfinity ? 0.0f : kernels::fast_exp(L[i * keys + j] - normalizer[j]);
    for (int64_t j = 0; j < keys; ++j) normalizer[j] = normalizer[j] == kMinusInfinity ? 0.0f : normalizer[j] + std::log(total[j]);
    for (int64_t i = 0; i < queries; ++i)
#pragma omp simd
        for (int64_t j = 0; j < keys; ++j) L[i * keys + j] -= normalizer[j];
}

// In place: entry (i, j) minus the logsumexp of column j over rows 0..i (allowed entries only);
// the per-entry normalizers go to C (Lq, Lk). A running (max, sum) per column makes it one pass.
void normalize_column_prefixes(float* L, int64_t queries, int64_t keys, float* C, std::vector<float>& scratch) {
    scratch.assign(static_cast<size_t>(2 * keys), 0.0f);
    float* running_max = scratch.data();
    float* running_sum = scratch.data() + keys;
    for (int64_t j = 0; j < keys; ++j) running_max[j] = kMinusInfinity;
    for (int64_t i = 0; i < queries; ++i) {
        for (int64_t j = 0; j < keys; ++j) {
            float& value = L[i * keys + j];
            if (value == kMinusInfinity) {
                C[i * keys + j] = 0.0f;
                continue;
            }
            const float top = std::max(running_max[j], value);
            running_sum[j] = running_sum[j] * kernels::fast_exp(running_max[j] - top) + kernels::fast_exp(value - top);
            running_max[j] = top;
            C[i * keys + j] = top + std::log(running_sum[j]);
            value -= C[i * keys + j];
        }
    }
}

}  // namespace

Var normalize_attention(const Var& scores, const AttentionMask& mask, const std::vector<NormalizeAxis>& steps) {
    const Dims d = check_scores(scores, mask, "normalize_attention");
    HNAS_CHECK(!steps.empty(), "normalize_attention: no normalization steps");
    const int64_t slices = d.batch * d.heads, slice = d.slice();
    // Per step, the normalizers of every slice: (slices, Lq), (slices, Lk) or (slices, Lq, Lk).
    std::vector<Tensor> normalizers;
    for (NormalizeAxis axis : steps) {
        const int64_t per_slice = axis == NormalizeAxis::keys ? d.queries : axis == NormalizeAxis::queries ? d.keys : slice;
        normalizers.push_back(Tensor::empty({slices, per_slice}));
    }
    Tensor log_weights = Tensor::empty(scores.shape());  // the final log values: enough to undo every step
    Tensor weights = Tensor::empty(scores.shape());
    const float* in = scores.value().data();
#pragma omp parallel for schedule(dynamic) if (scores.numel() >= kernels::kParallelGrain)
    for (int64_t s = 0; s < slices; ++s) {
        std::vector<float> scratch;
        float* L = log_weights.data() + s * slice;
        load_masked(in + s * slice, SliceMask(mask, d, s / d.heads), d.queries, d.keys, L);
        for (size_t t = 0; t < steps.size(); ++t) {
            float* c = normalizers[t].data() + s * normalizers[t].dim(1);
            if (steps[t] == NormalizeAxis::keys) normalize_rows(L, d.queries, d.keys, c);
            if (steps[t] == NormalizeAxis::queries) normalize_columns(L, d.queries, d.keys, c, scratch);
            if (steps[t] == NormalizeAxis::queries_prefix) normalize_column_prefixes(L, d.queries, d.keys, c, scratch);
        }
        float* A = weights.data() + s * slice;
#pragma omp simd
        for (int64_t e = 0; e < slice; ++e) A[e] = kernels::fast_exp(L[e]);
    }

    return make_result("normalize_attention", weights, {scores}, [=](const Tensor& dy, GradSink& sink) {
        auto [dscores, accumulate] = sink.target(0);
#pragma omp parallel for schedule(dynamic) if (dy.numel() >= kernels::kParallelGrain)
        for (int64_t s = 0; s < slices; ++s) {
            // P holds exp of the log values each step produced: the weights A for the last step, and
            // A ⊙ exp(c_last) for the step before it (c_last ≤ log L_k, as it normalizes values ≤ 0, so the
            // product stays finite). Only Sinkhorn with k > 1 has earlier steps: their log values W are
            // rebuilt from the final ones by adding each step's normalizers back. G is dLoss/dL.
            const size_t last = steps.size() - 1;
            const SliceMask allowed(mask, d, s / d.heads);
            const float *A = weights.data() + s * slice, *g = dy.data() + s * slice;
            std::vector<float> P(A, A + slice), G(static_cast<size_t>(slice)), column(static_cast<size_t>(d.keys)),
                carry(static_cast<size_t>(2 * d.keys)), W;
            if (steps.size() > 2) W.assign(log_weights.data() + s * slice, log_weights.data() + (s + 1) * slice);
#pragma omp simd
            for (int64_t e = 0; e < slice; ++e) G[static_cast<size_t>(e)] = g[e] * A[e];  // d exp(L) = exp(L) dL
            auto normalizer = [&](size_t t) { return normalizers[t].data() + s * normalizers[t].dim(1); };
            for (size_t t = last + 1; t-- > 0;) {
                if (t + 1 == last) {
                    const float* c = normalizer(last);
                    for (int64_t i = 0; i < d.queries; ++i)
#pragma omp simd
                        for (int64_t j = 0; j < d.keys; ++j) {
                            const int64_t e = i * d.keys + j;
                            const float c_last = steps[last] == NormalizeAxis::keys ? c[i]
                                                 : steps[last] == NormalizeAxis::queries ? c[j]
                                                                                          : c[e];
                            P[static_cast<size_t>(e)] = A[e] * std::exp(c_last);
                        }
                } else if (t + 1 < last) {
#pragma omp simd
                    for (int64_t e = 0; e < slice; ++e) P[static_cast<size_t>(e)] = kernels::fast_exp(W[static_cast<size_t>(e)]);
                }
                const float* c = normalizer(t);
                if (steps[t] == NormalizeAxis::keys) {
                    // log-softmax over keys: dL_in = dL_out − softmax · Σ_j dL_out
                    for (int64_t i = 0; i < d.queries; ++i) {
                        float* grow = G.data() + i * d.keys;
                        const float* prow = P.data() + i * d.keys;
                        float total = 0.0f;
#pragma omp simd reduction(+ : total)
                        for (int64_t j = 0; j < d.keys; ++j) total += grow[j];
#pragma omp simd
                        for (int64_t j = 0; j < d.keys; ++j) grow[j] -= prow[j] * total;
                    }
                } else if (steps[t] == NormalizeAxis::queries) {
                    std::fill(column.begin(), column.end(), 0.0f);
                    for (int64_t i = 0; i < d.queries; ++i)
#pragma omp simd
                        for (int64_t j = 0; j < d.keys; ++j) column[static_cast<size_t>(j)] += G[static_cast<size_t>(i * d.keys + j)];
                    for (int64_t i = 0; i < d.queries; ++i)
#pragma omp simd
                        for (int64_t j = 0; j < d.keys; ++j) {
                            const size_t e = static_cast<size_t>(i * d.keys + j);
                            G[e] -= P[e] * column[static_cast<size_t>(j)];
                        }
                } else {
                    // Prefix normalizer C_ij = logsumexp_{i' ≤ i} L_i'j. With T_ij = Σ_{i'' ≥ i} dL_i''j ·
                    // exp(C_ij − C_i''j), kept by the recursion T_ij = dL_ij + exp(C_ij − C_next,j)·T_next,j
                    // (all exponents ≤ 0), the gradient is dL_in_ij = dL_ij − exp(L_out_ij) · T_ij.
                    float* T = carry.data();
                    float* C_next = carry.data() + d.keys;
                    std::fill(T, T + d.keys, 0.0f);
                    for (int64_t j = 0; j < d.keys; ++j) C_next[j] = kMinusInfinity;
                    for (int64_t i = d.queries; i-- > 0;)
                        for (int64_t j = 0; j < d.keys; ++j) {
                            if (!allowed.allowed(i, j)) continue;
                            const size_t e = static_cast<size_t>(i * d.keys + j);
                            const float C = c[e];
                            T[j] = G[e] + (C_next[j] == kMinusInfinity ? 0.0f : kernels::fast_exp(C - C_next[j]) * T[j]);
                            C_next[j] = C;
                            G[e] -= P[e] * T[j];
                        }
                }
                if (!W.empty()) {
                    // Undo step t: W becomes the log values step t started from.
                    for (int64_t i = 0; i < d.queries; ++i)
#pragma omp simd
                        for (int64_t j = 0; j < d.keys; ++j) {
                            const int64_t e = i * d.keys + j;
                            W[static_cast<size_t>(e)] += steps[t] == NormalizeAxis::keys      ? c[i]
                                                         : steps[t] == NormalizeAxis::queries ? c[j]
                                                                                              : c[e];
                        }
                }
            }
            float* out = dscores.data() + s * slice;
#pragma omp simd
            for (int64_t e = 0; e < slice; ++e) out[e] = (accumulate ? out[e] : 0.0f) + G[static_cast<size_t>(e)];
        }
    });
}

Var standardize_attention(const Var& scores, const Var& gain, const Var& bias, const AttentionMask& mask, float eps) {
    const Dims d = check_scores(scores, mask, "standardize_attention");
    HNAS_CHECK(gain.shape() == Shape{d.heads} && bias.shape() == Shape{d.heads}, "standardize_attention: gain ",
               shape_str(gain.shape()), " and bias ", shape_str(bias.shape()), " must be (", d.heads, ")");
    const int64_t slices = d.batch * d.heads, slice = d.slice();
    Tensor weights = Tensor::empty(scores.shape());
    Tensor row_mean = Tensor::zeros({slices, d.queries}), row_rstd = Tensor::zeros({slices, d.queries});
    const float *in = scores.value().data(), *g = gain.value().data(), *b = bias.value().data();
#pragma omp parallel for schedule(dynamic) if (scores.numel() >= kernels::kParallelGrain)
    for (int64_t s = 0; s < slices; ++s) {
        const SliceMask allowed(mask, d, s / d.heads);
        const int64_t h = s % d.heads;
        for (int64_t i = 0; i < d.queries; ++i) {
            const float* row = in + s * slice + i * d.keys;
            float* out = weights.data() + s * slice + i * d.keys;
            double total = 0.0;
            int64_t count = 0;
            for (int64_t j = 0; j < d.keys; ++j)
                if (allowed.allowed(i, j)) total += row[j], ++count;
            if (count == 0) {
                for (int64_t j = 0; j < d.keys; ++j) out[j] = 0.0f;
                continue;
            }
            const float mu = static_cast<float>(total / static_cast<double>(count));
            double squares = 0.0;
            for (int64_t j = 0; j < d.keys; ++j)
                if (allowed.allowed(i, j)) squares += (row[j] - mu) * (row[j] - mu);
            const float rstd = 1.0f / std::sqrt(static_cast<float>(squares / static_cast<double>(count)) + eps);
            for (int64_t j = 0; j < d.keys; ++j) out[j] = allowed.allowed(i, j) ? g[h] * (row[j] - mu) * rstd + b[h] : 0.0f;
            row_mean.data()[s * d.queries + i] = mu;
            row_rstd.data()[s * d.queries + i] = rstd;
        }
    }

    Tensor sv = scores.value(), gv = gain.value();
    return make_result("standardize_attention", weights, {scores, gain, bias}, [=](const Tensor& dy, GradSink& sink) {
        // z = (S − μ)·rstd over the allowed keys; like layer norm: dS = rstd·(dz − mean(dz) − z·mean(dz ⊙ z))
        // with dz = dA·gain; dgain = Σ dA ⊙ z; dbias = Σ dA, all over allowed entries.
        std::vector<double> dgain(static_cast<size_t>(slices), 0.0), dbias(static_cast<size_t>(slices), 0.0);
        const bool want_scores = sink.wants(0);
        Tensor* dscores = nullptr;
        bool accumulate = false;
        if (want_scores) {
            auto target = sink.target(0);
            dscores = &target.grad;
            accumulate = target.accumulate;
        }
        const float *in = sv.data(), *g = gv.data(), *up = dy.data(), *mean = row_mean.data(), *rstd = row_rstd.data();
#pragma omp parallel for schedule(dynamic) if (dy.numel() >= kernels::kParallelGrain)
        for (int64_t s = 0; s < slices; ++s) {
            const SliceMask allowed(mask, d, s / d.heads);
            const int64_t h = s % d.heads;
            for (int64_t i = 0; i < d.queries; ++i) {
                const int64_t base = s * slice + i * d.keys;
                const float mu = mean[s * d.queries + i], r = rstd[s * d.queries + i];
                double sum_dz = 0.0, sum_dz_z = 0.0;
                int64_t count = 0;
                for (int64_t j = 0; j < d.keys; ++j) {
                    if (!allowed.allowed(i, j)) continue;
                    const float z = (in[base + j] - mu) * r;
                    sum_dz += up[base + j] * g[h];
                    sum_dz_z += up[base + j] * g[h] * z;
                    dgain[static_cast<size_t>(s)] += up[base + j] * z;
                    dbias[static_cast<size_t>(s)] += up[base + j];
                    ++count;
                }
                if (!dscores) continue;
                float* out = dscores->data() + base;
                const float mean_dz = count ? static_cast<float>(sum_dz / static_cast<double>(count)) : 0.0f;
                const float mean_dz_z = count ? static_cast<float>(sum_dz_z / static_cast<double>(count)) : 0.0f;
                for (int64_t j = 0; j < d.keys; ++j) {
                    float value = 0.0f;
                    if (allowed.allowed(i, j)) {
                        const float z = (in[base + j] - mu) * r;
                        value = r * (up[base + j] * g[h] - mean_dz - z * mean_dz_z);
                    }
                    out[j] = accumulate ? out[j] + value : value;
                }
            }
        }
        // Per-slice partial sums reduced per head in a fixed order: deterministic across thread counts.
        auto reduce_heads = [&](size_t input, const std::vector<double>& per_slice) {
            if (!sink.wants(input)) return;
            auto [grad, accumulate_head] = sink.target(input);
            for (int64_t h = 0; h < d.heads; ++h) {
                double total = 0.0;
                for (int64_t b = 0; b < d.batch; ++b) total += per_slice[static_cast<size_t>(b * d.heads + h)];
                grad.data()[h] = (accumulate_head ? grad.data()[h] : 0.0f) + static_cast<float>(total);
            }
        };
        reduce_heads(1, dgain);
        reduce_heads(2, dbias);
    });
}

Var hybrid_attention(const Var& scores, const Var& theta, const AttentionMask& mask) {
    const Dims d = check_scores(scores, mask, "hybrid_attention");
    HNAS_CHECK(theta.shape() == Shape{d.heads}, "hybrid_attention: theta ", shape_str(theta.shape()), " must be (",
               d.heads, ")");
    const int64_t slices = d.batch * d.heads, slice = d.slice();
    std::vector<float> u(static_cast<size_t>(d.heads));
    for (int64_t h = 0; h < d.heads; ++h) u[static_cast<size_t>(h)] = 1.0f / (1.0f + std::exp(-theta.value().data()[h]));
    Tensor doubly = Tensor::empty(scores.shape()), softmax = Tensor::empty(scores.shape()), mixed = Tensor::empty(scores.shape());
    // The row normalizers of DNAS's second (key-axis) step: exp(L1) = A_dnas · exp(r) recovers the first
    // step's weights in the backward pass, and r ≤ log L_k keeps that product finite.
    Tensor row_normalizers = Tensor::empty({slices, d.queries});
    const float* in = scores.value().data();
#pragma omp parallel for schedule(dynamic) if (scores.numel() >= kernels::kParallelGrain)
    for (int64_t s = 0; s < slices; ++s) {
        std::vector<float> scratch, L(static_cast<size_t>(slice)), normalizer(static_cast<size_t>(std::max(d.queries, d.keys)));
        float* A_d = doubly.data() + s * slice;
        float* A_l = softmax.data() + s * slice;
        load_masked(in + s * slice, SliceMask(mask, d, s / d.heads), d.queries, d.keys, L.data());
        std::copy(L.begin(), L.end(), A_l);  // LNAS works in place in its output
        normalize_rows(A_l, d.queries, d.keys, normalizer.data());
        normalize_columns(L.data(), d.queries, d.keys, normalizer.data(), scratch);
        normalize_rows(L.data(), d.queries, d.keys, row_normalizers.data() + s * d.queries);
        const float w = u[static_cast<size_t>(s % d.heads)];
        float* out = mixed.data() + s * slice;
#pragma omp simd
        for (int64_t e = 0; e < slice; ++e) {
            A_d[e] = kernels::fast_exp(L[static_cast<size_t>(e)]);
            A_l[e] = kernels::fast_exp(A_l[e]);
            out[e] = w * A_d[e] + (1.0f - w) * A_l[e];
        }
    }

    return make_result("hybrid_attention", mixed, {scores, theta}, [=](const Tensor& dy, GradSink& sink) {
        std::vector<double> dtheta_per_slice(static_cast<size_t>(slices), 0.0);
        Tensor* dscores = nullptr;
        bool accumulate = false;
        if (sink.wants(0)) {
            auto target = sink.target(0);
            dscores = &target.grad;
            accumulate = target.accumulate;
        }
#pragma omp parallel for schedule(dynamic) if (dy.numel() >= kernels::kParallelGrain)
        for (int64_t s = 0; s < slices; ++s) {
            const float w = u[static_cast<size_t>(s % d.heads)];
            const float *g = dy.data() + s * slice, *A_d = doubly.data() + s * slice, *A_l = softmax.data() + s * slice;
            const float* r = row_normalizers.data() + s * d.queries;
            double dtheta = 0.0;
            for (int64_t e = 0; e < slice; ++e) dtheta += static_cast<double>(g[e]) * (A_d[e] - A_l[e]);
            dtheta_per_slice[static_cast<size_t>(s)] = dtheta * w * (1.0f - w);
            if (!dscores) continue;
            std::vector<float> G_d(static_cast<size_t>(slice)), column(static_cast<size_t>(d.keys), 0.0f);
            float* out = dscores->data() + s * slice;
            for (int64_t i = 0; i < d.queries; ++i) {
                const int64_t row = i * d.keys;
                // LNAS: dS = A_l ⊙ (g_l − Σ_j g_l A_l) with g_l = (1 − u)·dy; DNAS's key step likewise.
                float dot_l = 0.0f, dot_d = 0.0f;
#pragma omp simd reduction(+ : dot_l, dot_d)
                for (int64_t j = 0; j < d.keys; ++j) {
                    dot_l += g[row + j] * A_l[row + j];
                    dot_d += g[row + j] * A_d[row + j];
                }
                for (int64_t j = 0; j < d.keys; ++j) {
                    const float softmax_part = (1.0f - w) * A_l[row + j] * (g[row + j] - dot_l);
                    G_d[static_cast<size_t>(row + j)] = w * A_d[row + j] * (g[row + j] - dot_d);  // d L1
                    out[row + j] = (accumulate ? out[row + j] : 0.0f) + softmax_part;
                }
            }
            // DNAS's query step: dS = dL1 − exp(L1) ⊙ Σ_i dL1, with exp(L1) = A_d · exp(r_i).
            for (int64_t i = 0; i < d.queries; ++i)
#pragma omp simd
                for (int64_t j = 0; j < d.keys; ++j) column[static_cast<size_t>(j)] += G_d[static_cast<size_t>(i * d.keys + j)];
            for (int64_t i = 0; i < d.queries; ++i) {
                const float scale = std::exp(r[i]);
                const int64_t row = i * d.keys;
#pragma omp simd
                for (int64_t j = 0; j < d.keys; ++j) {
                    out[row + j] += G_d[static_cast<size_t>(row + j)] - A_d[row + j] * scale * column[static_cast<size_t>(j)];
                }
            }
        }
        if (sink.wants(1)) {
            auto [grad, accumulate_theta] = sink.target(1);
            for (int64_t h = 0; h < d.heads; ++h) {
                double total = 0.0;
                for (int64_t s = h; s < slices; s += d.heads) total += dtheta_per_slice[static_cast<size_t>(s)];
                grad.data()[h] = (accumulate_theta ? grad.data()[h] : 0.0f) + static_cast<float>(total);
            }
        }
    });
}

}  // namespace hnas::ops
