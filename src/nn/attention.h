// Multi-head attention: q/k/v/output projections, heads split and merged with one reshape+permute
// each, scores for all heads from one batched matmul. Shapes: B batch, Tq queries, Tk keys,
// D model width, H heads, K = D/H head width.
#pragma once

#include "nn/layers.h"

namespace hnas::nn {

class MultiHeadAttention : public Module {
public:
    MultiHeadAttention(int64_t width, int64_t heads, float attention_dropout, Rng& init_rng, Rng& dropout_rng);

    // query (B, Tq, D), memory (B, Tk, D), mask additive and broadcastable to (B, H, Tq, Tk) or undefined.
    Var forward(const Var& query, const Var& memory, const Tensor& mask) const;

private:
    Var split_heads(const Var& x) const;  // (B, T, D) -> (B, H, T, K)
    Var merge_heads(const Var& x) const;  // (B, H, T, K) -> (B, T, D)

    int64_t width_, heads_;
    Linear& q_proj_;
    Linear& k_proj_;
    Linear& v_proj_;
    Linear& out_proj_;
    Dropout& attention_dropout_;
};

}  // namespace hnas::nn
