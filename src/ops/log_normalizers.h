// The log-space normalizers of the fused attention kernels (internal to ops), each beside its adjoint.
// All work on one (b, h) slice L of (Lq, Lk) log values, -inf where not allowed (attention_slices.h).
// A forward step turns L_in into L_out = L_in − c (c per row, per column or per entry); its adjoint
// turns G = dLoss/dL_out into dLoss/dL_in in place, given P = exp(L_out).
#pragma once

#include <cstdint>
#include <vector>

#include "ops/attention_slices.h"

namespace hnas::ops {

// ---- over keys (rows) ----------------------------------------------------------------------------
// out = softmax(x) of one row of n values with one exp per entry; returns the row's logsumexp, or 0 for
// a row with nothing allowed (out is then all 0).
float softmax_row(const float* x, int64_t n, float* out);
// forward: dx = A ⊙ (g − Σ_j g ⊙ A) for every row of A = softmax(L); G may alias nothing.
void softmax_rows_adjoint(const float* A, const float* g, const AttentionDims& d, float* G);
// L_ij −= c_i with c_i = logsumexp_j L_ij (0 for an empty row).
void normalize_rows(float* L, const AttentionDims& d, float* c);
// dL_in = dL_out − P ⊙ Σ_j dL_out, per row.
void normalize_rows_adjoint(const float* P, const AttentionDims& d, float* G);

// ---- over queries (columns) ----------------------------------------------------------------------
// c_j = logsumexp_i L_ij (0 for an empty column); `total` (Lk) is scratch.
void column_logsumexp(const float* L, const AttentionDims& d, float* c, float* total);
// L_ij −= c_j.
void subtract_columns(float* L, const AttentionDims& d, const float* c);
// dL_in = dL_out − P ⊙ Σ_i dL_out, per column; `column` (Lk) is scratch.
void normalize_columns_adjoint(const float* P, const AttentionDims& d, float* G, float* column);

// ---- over the queries up to each query (column prefixes) -----------------------------------------
// L_ij −= C_ij with C_ij = logsumexp_{i' ≤ i} L_i'j over allowed entries (C (Lq, Lk) keeps them).
void normalize_column_prefixes(float* L, const AttentionDims& d, float* C, std::vector<float>& scratch);
// dL_in_ij = dL_ij − P_ij · Σ_{i'' ≥ i} dL_i''j · exp(C_ij − C_i''j), over allowed entries; `carry`
// (2·Lk) is scratch.
void normalize_column_prefixes_adjoint(const float* P, const float* C, const SliceMask& allowed, const AttentionDims& d,
                                       float* G, float* carry);

}  // namespace hnas::ops
