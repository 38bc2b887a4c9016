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

// Softmax of one row x (n values, masked ones -inf) into out with one exp per entry:
// out = exp(x − max) / Σ exp(x − max). Returns the row's logsumexp, or 0 for a row with nothing
// allowed (out is then all 0).
float softmax_row(const float* x, int64_t n, float* out) {
    float top = kMinusInfinity;
    // Not std::max, which returns a reference: GCC 12 then leaves the reduction scalar.
#pragma omp simd reduction(max : top)
    for (int64_t j = 0; j < n; ++j) top = top > x[j] ? top : x[j];
    if (top == kMinusInfinity) {
        std::fill(out, out + n, 0.0f);
        return 0.0f;
    }
    float total = 0.0f;
#pragma omp simd reduction(+ : total)
    for (int64_t j = 0; j < n; ++j) {
        out[j] = kernels::fast_exp(x[j] - top);
        total += out[j];
    }
    const float scale = 1.0f / total;
#pragma omp simd
    for (int64_t j = 0; j < n; ++j) out[j] *= scale;
    return top + std::log(total);
}

// In place: each row of L (Lq, Lk) minus its logsumexp; the normalizers go to `normalizer` (Lq).
void normalize_rows(float* L, int64_t queries, int64_t keys, float* normalizer) {
    for (int64_t i = 0; i < queries; ++i) {
        float* row = L + i * keys;
        float top = kMinusInfinity;
#pragma omp simd reduction(max : top)
        for (int64_t j = 0; j < keys; ++j) top = top > row[j] ? top : row[j];
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

// The logsumexp of each column of L over queries into `normalizer` (Lk), 0 for a column with nothing
// allowed; `total` (Lk) is scratch. Two sweeps down the rows, each a contiguous vector loop over keys:
// the column maxima, then the sums of exp(L − max).
void column_logsumexp(const float* L, int64_t queries, int64_t keys, float* normalizer, float* total) {
    std::fill(normalizer, normalizer + keys, kMinusInfinity);
    std::fill(total, total + keys, 0.0f);
    for (int64_t i = 0; i < queries; ++i)
#pragma omp simd
        for (int64_t j = 0; j < keys; ++j) normalizer[j] = std::max(normalizer[j], L[i * keys + j]);
    // An all -inf column shifts by 0 instead, so its sum is exactly 0 rather than exp(-inf - -inf).
    for (int64_t j = 0; j < keys; ++j) normalizer[j] = normalizer[j] == kMinusInfinity ? 0.0f : normalizer[j];
    for (int64_t i = 0; i < queries; ++i)
#pragma omp simd
        for (int64_t j = 0; j < keys; ++j) total[j] += kernels::fast_exp(L[i * keys + j] - normalizer[j]);
    for (int64_t j = 0; j < keys; ++j) normalizer[j] = total[j] > 0.0f ? normalizer[j] + std::log(total[j]) : 0.0f;
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

// The normalizer of a step at entry (i, j): per query, per key or per entry.
float normalizer_at(NormalizeAxis axis, const float* c, int64_t i, int64_t j, int64_t keys) {
    return axis == NormalizeAxis::keys ? c[i] : axis == NormalizeAxis::queries ? c[j] : c[i * keys + j];
}

// The adjoint of one log-normalization step, in place on G = dLoss/dL_out (becoming dLoss/dL_in), given
// P = exp(L_out). Over keys: dL_in = dL_out − P ⊙ Σ_j dL_out (per row); over queries likewise per column.
void step_adjoint(NormalizeAxis axis, const float* P, const float* c, const SliceMask& allowed, const Dims& d, float* G,
                  float* column, float* carry) {
    if (axis == NormalizeAxis::keys) {
        for (int64_t i = 0; i < d.queries; ++i) {
            float* grow = G + i * d.keys;
            const float* prow = P + i * d.keys;
            float total = 0.0f;
#pragma omp simd reduction(+ : total)
            for (int64_t j = 0; j < d.keys; ++j) total += grow[j];
#pragma omp simd
            for (int64_t j = 0; j < d.keys; ++j) grow[j] -= prow[j] * total;
        }
    } else if (axis == NormalizeAxis::queries) {
        std::fill(column, column + d.keys, 0.0f);
        for (int64_t i = 0; i < d.queries; ++i)
#pragma omp simd
            for (int64_t j = 0; j < d.keys; ++j) column[j] += G[i * d.keys + j];
        for (int64_t i = 0; i < d.queries; ++i)
#pragma omp simd
            for (int64_t j = 0; j < d.keys; ++j) G[i * d.keys + j] -= P[i * d.keys + j] * column[j];
    } else {
        // Prefix normalizer C_ij = logsumexp_{i' ≤ i} L_i'j. With T_ij = Σ_{i'' ≥ i} dL_i''j ·
        // exp(C_ij − C_i''j), kept by the recursion T_ij = dL_ij + exp(C_ij − C_next,j)·T_next,j
        // (all exponents ≤ 0), the gradient is dL_in_ij = dL_ij − exp(L_out_ij) · T_ij.
        float* T = carry;
        float* C_next = carry + d.keys;
        std::fill(T, T + d.keys, 0.0f);
        std::fill(C_next, C_next + d.keys, kMinusInfinity);
        for (int64_t i = d.queries; i-- > 0;)
            for (int64_t j = 0; j < d.keys; ++j) {
                if (!allowed.allowed(i, j)) continue;
                const int64_t e = i * d.keys + j;
                const float C = c[e];
                T[j] = G[e] + (C_next[j] == kMinusInfinity ? 0.0f : kernels::fast_exp(C - C_next[j]) * T[j]);
                C_next[j] = C;
                G[e] -= P[e] * T[j];
            }
    }
}

}  // namespace

Var normalize_attention(const Var& scores, const AttentionMask& mask, const std::vector<NormalizeAxis>& steps) {
    const Dims d = check_scores(scores, mask, "normalize_attention");
    HNAS_CHECK(!steps.empty(), "normalize_attention: no normalization steps");
    const int64_t slices = d.batch * d.heads, slice = d.slice();
    const size_t last = steps.size() - 1;
    // Per step, the normalizers of every slice: (slices, Lq), (slices, Lk) or (slices, Lq, Lk).
    std::vector<Tensor> normalizers;
    for (NormalizeAxis axis : steps) {
        const int64_t per_slice = axis == NormalizeAxis::keys ? d.queries : axis == NormalizeAxis::queries ? d.keys : slice;
        normalizers.push_back(Tensor::empty({slices, per_slice}));
    }
    // The backward pass gets the last two steps' exp(L) from the weights; only Sinkhorn with k > 1 has
    // earlier steps, rebuilt from the final log values, which are kept for it alone.
    const bool keep_log = steps.size() > 2;
    Tensor log_weights = keep_log ? Tensor::empty(scores.shape()) : Tensor();
    Tensor weights = Tensor::empty(scores.shape());
    const float* in = scores.value().data();
#pragma omp parallel if (scores.numel() >= kernels::kParallelGrain)
    {
        // Per thread, reused across slices: a slice of log values (unless kept) and per-key vectors.
        std::vector<float> work(keep_log ? 0 : static_cast<size_t>(slice)), total(static_cast<size_t>(d.keys)), scratch;
#pragma omp for schedule(static)
        for (int64_t s = 0; s < slices; ++s) {
            float* L = keep_log ? log_weights.data() + s * slice : work.data();
            float* A = weights.data() + s * slice;
            load_masked(in + s * slice, SliceMask(mask, d, s / d.heads), d.queries, d.keys, L);
            // A query-axis step right before the last (key-axis) step is not subtracted in a sweep of
            // its own: the last step subtracts it row by row as it goes.
            const float* pending_columns = nullptr;
            for (size_t t = 0; t < last; ++t) {
                float* c = normalizers[t].data() + s * normalizers[t].dim(1);
                if (steps[t] == NormalizeAxis::keys) normalize_rows(L, d.queries, d.keys, c);
                if (steps[t] == NormalizeAxis::queries_prefix) normalize_column_prefixes(L, d.queries, d.keys, c, scratch);
                if (steps[t] == NormalizeAxis::queries) {
                    column_logsumexp(L, d.queries, d.keys, c, total.data());
                    if (t + 1 == last && steps[last] == NormalizeAxis::keys) {
                        pending_columns = c;
                    } else {
                        for (int64_t i = 0; i < d.queries; ++i)
#pragma omp simd
                            for (int64_t j = 0; j < d.keys; ++j) L[i * d.keys + j] -= c[j];
                    }
                }
            }
            float* c = normalizers[last].data() + s * normalizers[last].dim(1);
            if (steps[last] == NormalizeAxis::keys) {
                // The weights straight from a softmax per row: one exp per entry.
                for (int64_t i = 0; i < d.queries; ++i) {
                    float* row = L + i * d.keys;
                    if (pending_columns) {
#pragma omp simd
                        for (int64_t j = 0; j < d.keys; ++j) row[j] -= pending_columns[j];
                    }
                    c[i] = softmax_row(row, d.keys, A + i * d.keys);
                    if (keep_log) {
#pragma omp simd
                        for (int64_t j = 0; j < d.keys; ++j) row[j] -= c[i];
                    }
                }
            } else {
                if (steps[last] == NormalizeAxis::queries) {
                    column_logsumexp(L, d.queries, d.keys, c, total.data());
                    for (int64_t i = 0; i < d.queries; ++i)
#pragma omp simd
                        for (int64_t j = 0; j < d.keys; ++j) L[i * d.keys + j] -= c[j];
                }
                if (steps[last] == NormalizeAxis::queries_prefix) normalize_column_prefixes(L, d.queries, d.keys, c, scratch);
#pragma omp simd
                for (int64_t e = 0; e < slice; ++e) A[e] = kernels::fast_exp(L[e]);
            }
        }
    }

    return make_result("normalize_attention", weights, {scores}, [=](const Tensor& dy, GradSink& sink) {
        // Plain variables, not a structured binding: clang 14 (the fuzzing build, scripts/fuzz.sh) cannot
        // capture structured bindings in the OpenMP region below.
        const GradSink::Target target = sink.target(0);
        Tensor& dscores = target.grad;
        const bool accumulate = target.accumulate;
        auto normalizer = [&](size_t t, int64_t s) { return normalizers[t].data() + s * normalizers[t].dim(1); };
#pragma omp parallel if (dy.numel() >= kernels::kParallelGrain)
        {
            // Per thread: G = dLoss/dL (in the output itself unless adding to an existing gradient),
            // P = exp(L) of the step being undone, W the log values for Sinkhorn's earlier steps.
            std::vector<float> work(accumulate ? static_cast<size_t>(slice) : 0), P(last > 0 ? static_cast<size_t>(slice) : 0),
                W(keep_log ? static_cast<size_t>(slice) : 0), column(static_cast<size_t>(d.keys)),
                carry(static_cast<size_t>(2 * d.keys));
#pragma omp for schedule(static)
            for (int64_t s = 0; s < slices; ++s) {
                const SliceMask allowed(mask, d, s / d.heads);
                const float *A = weights.data() + s * slice, *g = dy.data() + s * slice;
                float* out = dscores.data() + s * slice;
                float* G = accumulate ? work.data() : out;
                if (keep_log) std::copy(log_weights.data() + s * slice, log_weights.data() + (s + 1) * slice, W.begin());
                // The last step with P = A and dL = g ⊙ A (d exp(L) = exp(L) dL); over keys that is the
                // softmax gradient A ⊙ (g − Σ_j g ⊙ A) in one sweep.
                const float* c_last = normalizer(last, s);
                if (steps[last] == NormalizeAxis::keys) {
                    for (int64_t i = 0; i < d.queries; ++i) {
                        const int64_t row = i * d.keys;
                        float dot = 0.0f;
#pragma omp simd reduction(+ : dot)
                        for (int64_t j = 0; j < d.keys; ++j) dot += g[row + j] * A[row + j];
#pragma omp simd
                        for (int64_t j = 0; j < d.keys; ++j) G[row + j] = A[row + j] * (g[row + j] - dot);
                    }
                } else {
#pragma omp simd
                    for (int64_t e = 0; e < slice; ++e) G[e] = g[e] * A[e];
                    step_adjoint(steps[last], A, c_last, allowed, d, G, column.data(), carry.data());
                }
                auto undo = [&](size_t step) {  // W becomes the log values step `step` started from
                    const float* c = normalizer(step, s);
                    for (int64_t i = 0; i < d.queries; ++i)
#pragma omp simd
                        for (int64_t j = 0; j < d.keys; ++j) W[i * d.keys + j] += normalizer_at(steps[step], c, i, j, d.keys);
                };
                for (size_t t = last; t-- > 0;) {
                    if (t + 1 == last) {
                        // exp of this step's output is A ⊙ exp(c_last), c_last ≤ log L_k or log L_q as it
                        // normalizes values ≤ 0, so the product stays finite. One exp per row or column.
                        if (steps[last] == NormalizeAxis::keys) {
                            for (int64_t i = 0; i < d.queries; ++i) {
                                const float scale = std::exp(c_last[i]);
#pragma omp simd
                                for (int64_t j = 0; j < d.keys; ++j) P[i * d.keys + j] = A[i * d.keys + j] * scale;
                            }
                        } else if (steps[last] == NormalizeAxis::queries) {
                            for (int64_t j = 0; j < d.keys; ++j) column[j] = std::exp(c_last[j]);
                            for (int64_t i = 0; i < d.queries; ++i)
#pragma omp simd
                                for (int64_t j = 0; j < d.keys; ++j) P[i * d.keys + j] = A[i * d.keys + j] * column[j];
                        } else {
#pragma omp simd
                            for (int64_t e = 0; e < slice; ++e) P[e] = A[e] * kernels::fast_exp(c_last[e]);
                        }
                        if (keep_log) undo(last);
                    } else {
                        undo(t + 1);
#pragma omp simd
                        for (int64_t e = 0; e < slice; ++e) P[e] = kernels::fast_exp(W[e]);
                    }
                    step_adjoint(steps[t], P.data(), normalizer(t, s), allowed, d, G, column.data(), carry.data());
                }
                if (accumulate) {
#pragma omp simd
                    for (int64_t e = 0; e < slice; ++e) out[e] += G[e];
                }
            }
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
#pragma omp parallel if (scores.numel() >= kernels::kParallelGrain)
    {
        std::vector<float> L(static_cast<size_t>(slice)), column(static_cast<size_t>(d.keys)), total(static_cast<size_t>(d.keys));
#pragma omp for schedule(static)
        for (int64_t s = 0; s < slices; ++s) {
            float* A_d = doubly.data() + s * slice;
            float* A_l = softmax.data() + s * slice;
            float* out = mixed.data() + s * slice;
            float* r = row_normalizers.data() + s * d.queries;
            const float w = u[static_cast<size_t>(s % d.heads)];
            load_masked(in + s * slice, SliceMask(mask, d, s / d.heads), d.queries, d.keys, L.data());
            // DNAS's query-axis normalizers (Eq. 6) first, as LNAS leaves L unchanged.
            column_logsumexp(L.data(), d.queries, d.keys, column.data(), total.data());
            for (int64_t i = 0; i < d.queries; ++i) {
                float* row = L.data() + i * d.keys;
                softmax_row(row, d.keys, A_l + i * d.keys);  // LNAS (Eq. 3)
#pragma omp simd
                for (int64_t j = 0; j < d.keys; ++j) row[j] -= column[j];
                r[i] = softmax_row(row, d.keys, A_d + i * d.keys);  // DNAS's key-axis step (Eq. 7-8)
#pragma omp simd
                for (int64_t j = 0; j < d.keys; ++j) out[i * d.keys + j] = w * A_d[i * d.keys + j] + (1.0f - w) * A_l[i * d.keys + j];
            }
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
#pragma omp parallel if (dy.numel() >= kernels::kParallelGrain)
        {
            std::vector<float> column(static_cast<size_t>(d.keys));
#pragma omp for schedule(static)
            for (int64_t s = 0; s < slices; ++s) {
                const float w = u[static_cast<size_t>(s % d.heads)];
                const float *g = dy.data() + s * slice, *A_d = doubly.data() + s * slice, *A_l = softmax.data() + s * slice;
                const float* r = row_normalizers.data() + s * d.queries;
                float* out = dscores ? dscores->data() + s * slice : nullptr;
                std::fill(column.begin(), column.end(), 0.0f);
                // dθ = u(1 − u) Σ g ⊙ (A_d − A_l), from the same row dot products the score gradients use.
                double dtheta = 0.0;
                for (int64_t i = 0; i < d.queries; ++i) {
                    const int64_t row = i * d.keys;
                    float dot_l = 0.0f, dot_d = 0.0f;
#pragma omp simd reduction(+ : dot_l, dot_d)
                    for (int64_t j = 0; j < d.keys; ++j) {
                        dot_l += g[row + j] * A_l[row + j];
                        dot_d += g[row + j] * A_d[row + j];
                    }
                    dtheta += static_cast<double>(dot_d) - static_cast<double>(dot_l);
                    if (!out) continue;
                    // LNAS: dS = A_l ⊙ (g_l − Σ_j g_l A_l) with g_l = (1 − u)·dy; DNAS's key step likewise
                    // gives dL1 = u·A_d ⊙ (dy − Σ_j dy A_d), summed per column for the query step below.
#pragma omp simd
                    for (int64_t j = 0; j < d.keys; ++j) {
                        const float dL1 = w * A_d[row + j] * (g[row + j] - dot_d);
                        column[j] += dL1;
                        out[row + j] = (accumulate ? out[row + j] : 0.0f) + (1.0f - w) * A_l[row + j] * (g[row + j] - dot_l) + dL1;
                    }
                }
                dtheta_per_slice[static_cast<size_t>(s)] = dtheta * w * (1.0f - w);
                if (!out) continue;
                // DNAS's query step: dS = dL1 − exp(L1) ⊙ Σ_i dL1, with exp(L1) = A_d · exp(r_i).
                for (int64_t i = 0; i < d.queries; ++i) {
                    const float scale = std::exp(r[i]);
#pragma omp simd
                    for (int64_t j = 0; j < d.keys; ++j) out[i * d.keys + j] -= A_d[i * d.keys + j] * scale * column[j];
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
