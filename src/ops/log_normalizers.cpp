#include "ops/log_normalizers.h"

#include <cmath>

#include "backend/kernels.h"

namespace hnas::ops {

// ---- over keys (rows) ----------------------------------------------------------------------------

float softmax_row(const float* x, int64_t n, float* out) {
    const float top = kernels::max_value(x, n);
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

void softmax_rows_adjoint(const float* A, const float* g, const AttentionDims& d, float* G) {
    for (int64_t i = 0; i < d.queries; ++i) {
        const int64_t row = i * d.keys;
        float dot = 0.0f;
#pragma omp simd reduction(+ : dot)
        for (int64_t j = 0; j < d.keys; ++j) dot += g[row + j] * A[row + j];
#pragma omp simd
        for (int64_t j = 0; j < d.keys; ++j) G[row + j] = A[row + j] * (g[row + j] - dot);
    }
}

void normalize_rows(float* L, const AttentionDims& d, float* c) {
    for (int64_t i = 0; i < d.queries; ++i) {
        float* row = L + i * d.keys;
        const float top = kernels::max_value(row, d.keys);
        if (top == kMinusInfinity) {
            c[i] = 0.0f;
            continue;
        }
        float total = 0.0f;
#pragma omp simd reduction(+ : total)
        for (int64_t j = 0; j < d.keys; ++j) total += kernels::fast_exp(row[j] - top);
        const float normalizer = top + std::log(total);
#pragma omp simd
        for (int64_t j = 0; j < d.keys; ++j) row[j] -= normalizer;
        c[i] = normalizer;
    }
}

void normalize_rows_adjoint(const float* P, const AttentionDims& d, float* G) {
    for (int64_t i = 0; i < d.queries; ++i) {
        float* grow = G + i * d.keys;
        const float* prow = P + i * d.keys;
        float total = 0.0f;
#pragma omp simd reduction(+ : total)
        for (int64_t j = 0; j < d.keys; ++j) total += grow[j];
#pragma omp simd
        for (int64_t j = 0; j < d.keys; ++j) grow[j] -= prow[j] * total;
    }
}

// ---- over queries (columns) ----------------------------------------------------------------------

// Two sweeps down the rows, each a contiguous vector loop over keys: the column maxima, then the sums
// of exp(L − max).
void column_logsumexp(const float* L, const AttentionDims& d, float* c, float* total) {
    std::fill(c, c + d.keys, kMinusInfinity);
    std::fill(total, total + d.keys, 0.0f);
    for (int64_t i = 0; i < d.queries; ++i)
#pragma omp simd
        for (int64_t j = 0; j < d.keys; ++j) c[j] = std::max(c[j], L[i * d.keys + j]);
    // An all -inf column shifts by 0 instead, so its sum is exactly 0 rather than exp(-inf - -inf).
    for (int64_t j = 0; j < d.keys; ++j) c[j] = c[j] == kMinusInfinity ? 0.0f : c[j];
    for (int64_t i = 0; i < d.queries; ++i)
#pragma omp simd
        for (int64_t j = 0; j < d.keys; ++j) total[j] += kernels::fast_exp(L[i * d.keys + j] - c[j]);
    for (int64_t j = 0; j < d.keys; ++j) c[j] = total[j] > 0.0f ? c[j] + std::log(total[j]) : 0.0f;
}

void subtract_columns(float* L, const AttentionDims& d, const float* c) {
    for (int64_t i = 0; i < d.queries; ++i)
#pragma omp simd
        for (int64_t j = 0; j < d.keys; ++j) L[i * d.keys + j] -= c[j];
}

void normalize_columns_adjoint(const float* P, const AttentionDims& d, float* G, float* column) {
    std::fill(column, column + d.keys, 0.0f);
    for (int64_t i = 0; i < d.queries; ++i)
#pragma omp simd
        for (int64_t j = 0; j < d.keys; ++j) column[j] += G[i * d.keys + j];
    for (int64_t i = 0; i < d.queries; ++i)
#pragma omp simd
        for (int64_t j = 0; j < d.keys; ++j) G[i * d.keys + j] -= P[i * d.keys + j] * column[j];
}

// ---- over the queries up to each query (column prefixes) -----------------------------------------

// A running (max, sum) per column makes it one pass.
void normalize_column_prefixes(float* L, const AttentionDims& d, float* C, std::vector<float>& scratch) {
    scratch.assign(static_cast<size_t>(2 * d.keys), 0.0f);
    float* running_max = scratch.data();
    float* running_sum = scratch.data() + d.keys;
    std::fill(running_max, running_max + d.keys, kMinusInfinity);
    for (int64_t i = 0; i < d.queries; ++i) {
        for (int64_t j = 0; j < d.keys; ++j) {
            float& value = L[i * d.keys + j];
            if (value == kMinusInfinity) {
                C[i * d.keys + j] = 0.0f;
                continue;
            }
            const float top = std::max(running_max[j], value);
            running_sum[j] = running_sum[j] * kernels::fast_exp(running_max[j] - top) + kernels::fast_exp(value - top);
            running_max[j] = top;
            C[i * d.keys + j] = top + std::log(running_sum[j]);
            value -= C[i * d.keys + j];
        }
    }
}

// With T_ij = Σ_{i'' ≥ i} dL_i''j · exp(C_ij − C_i''j), kept by the recursion
// T_ij = dL_ij + exp(C_ij − C_next,j)·T_next,j (all exponents ≤ 0): dL_in_ij = dL_ij − P_ij · T_ij.
void normalize_column_prefixes_adjoint(const float* P, const float* C, const SliceMask& allowed, const AttentionDims& d,
                                       float* G, float* carry) {
    float* T = carry;
    float* C_next = carry + d.keys;
    std::fill(T, T + d.keys, 0.0f);
    std::fill(C_next, C_next + d.keys, kMinusInfinity);
    for (int64_t i = d.queries; i-- > 0;)
        for (int64_t j = 0; j < d.keys; ++j) {
            if (!allowed.allowed(i, j)) continue;
            const int64_t e = i * d.keys + j;
            T[j] = G[e] + (C_next[j] == kMinusInfinity ? 0.0f : kernels::fast_exp(C[e] - C_next[j]) * T[j]);
            C_next[j] = C[e];
            G[e] -= P[e] * T[j];
        }
}

}  // namespace hnas::ops
