#include "nn/attention.h"

#include <cmath>

namespace hnas::nn {

MultiHeadAttention::MultiHeadAttention(int64_t width, int64_t heads, float attention_dropout, Rng& init_rng,
                                       Rng& dropout_rng)
    : width_(width),
      heads_(heads),
      q_proj_(register_module("q_proj", std::make_unique<Linear>(width, width, init_rng))),
      k_proj_(register_module("k_proj", std::make_unique<Linear>(width, width, init_rng))),
      v_proj_(register_module("v_proj", std::make_unique<Linear>(width, width, init_rng))),
      out_proj_(register_module("out_proj", std::make_unique<Linear>(width, width, init_rng))),
      attention_dropout_(register_module("dropout", std::make_unique<Dropout>(attention_dropout, dropout_rng))) {
    HNAS_CHECK(heads > 0 && width % heads == 0, "attention: width ", width, " is not divisible by ", heads, " heads");
}

Var MultiHeadAttention::split_heads(const Var& x) const {
    return ops::permute(ops::reshape(x, {x.dim(0), x.dim(1), heads_, width_ / heads_}), {0, 2, 1, 3});
}

Var MultiHeadAttention::merge_heads(const Var& x) const {
    Var merged = ops::permute(x, {0, 2, 1, 3});  // (B, T, H, K)
    return ops::reshape(merged, {merged.dim(0), merged.dim(1), width_});
}

Var MultiHeadAttention::forward(const Var& query, const Var& memory, const Tensor& mask) const {
    HNAS_CHECK(query.rank() == 3 && memory.rank() == 3 && query.dim(2) == width_ && memory.dim(2) == width_ &&
                   query.dim(0) == memory.dim(0),
               "attention: query ", shape_str(query.shape()), " and memory ", shape_str(memory.shape()),
               " must be (B, T, ", width_, ") with the same batch");
    Var q = split_heads(q_proj_.forward(query));   // (B, H, Tq, K)
    Var k = split_heads(k_proj_.forward(memory));  // (B, H, Tk, K)
    Var v = split_heads(v_proj_.forward(memory));  // (B, H, Tk, K)
    const float scale = 1.0f / std::sqrt(static_cast<float>(width_ / heads_));
    Var scores = ops::matmul(q, k, false, true, scale);                         // (B, H, Tq, Tk)
    Var weights = attention_dropout_.forward(ops::softmax(scores, -1, mask));   // (B, H, Tq, Tk)
    return out_proj_.forward(merge_heads(ops::matmul(weights, v)));             // (B, Tq, D)
}

}  // namespace hnas::nn
