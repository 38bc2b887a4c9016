// The differentiable op set: every function takes and returns Vars, computes its value eagerly and
// records its backward closure beside the forward code (one file per family, see the comments).
// Shapes are checked here, at the op's boundary; an error names the op and the shapes involved.
#pragma once

#include <functional>
#include <memory>
#include <vector>

#include "autograd/variable.h"
#include "base/enum_names.h"
#include "base/rng.h"

namespace hnas::ops {

// ---- matmul.cpp -----------------------------------------------------------------------------------
// Who reads a product's result: anything, or only other products (attention's queries, keys, values
// and merged heads before the output projection). Under bf16 precision a result that only products
// read is written as its bf16 copy alone (Tensor::bf16_only); under f32 the two are the same.
enum class ResultReaders { any, products };
// Whether an op's result (or the gradient it hands back) is, in the models here, also a product's
// operand beside its other readers: then, under bf16 precision, it is written with its bf16 copy in the
// same pass (backend::operand_copy_to_fill).
enum class FeedsProducts { no, yes };
// op(a) · op(b) over the last two axes; leading (batch) axes must match, or b may be 2-D (shared).
// trans_a / trans_b read the stored matrix as its transpose, without copying. alpha scales the product.
Var matmul(const Var& a, const Var& b, bool trans_a = false, bool trans_b = false, float alpha = 1.0f);
// x · weightᵀ + bias with weight (out, in), x (..., in) -> (..., out). bias may be undefined.
Var linear(const Var& x, const Var& weight, const Var& bias, ResultReaders readers = ResultReaders::any);
enum class GeluForm { erf, tanh };
// gelu(linear(x, weight, bias), form) fused: without a backward to feed, GELU runs in the product's
// epilogue; with one, the GELU derivative and the bias gradient's sum are one pass over the rows.
Var linear_gelu(const Var& x, const Var& weight, const Var& bias, GeluForm form,
                ResultReaders readers = ResultReaders::any);
// The products of multi-head attention on projections (B, T, H·K) as the linear layers write them,
// heads side by side in each row; equal to splitting the heads (reshape to (B, T, H, K), permute to
// (B, H, T, K)) before matmul and merging them after, without those copies.
// head_scores: alpha · Q_h K_hᵀ for q (B, Tq, H·K), k (B, Tk, H·K) -> (B, H, Tq, Tk).
// Grouped queries: q (B·G, 1, H·K) against k (B, Tk, H·K), G consecutive rows of q reading one row of
// k (beam search's hypotheses of one source), -> (B·G, H, 1, Tk); equal to k's rows repeated G times,
// as one product of G queries a (row, head) instead of G products of one.
Var head_scores(const Var& q, const Var& k, int64_t heads, float alpha = 1.0f);
// head_context: W_h V_h for weights (B, H, Tq, Tk), v (B, Tk, H·K) -> merged (B, Tq, H·K); grouped as
// head_scores: weights (B·G, H, 1, Tk), v (B, Tk, H·K) -> (B·G, 1, H·K).
Var head_context(const Var& weights, const Var& v, ResultReaders readers = ResultReaders::any);

// ---- elementwise.cpp ------------------------------------------------------------------------------
// Binary ops broadcast like numpy; gradients are summed back over the broadcast axes.
Var add(const Var& a, const Var& b);
Var sub(const Var& a, const Var& b);
Var mul(const Var& a, const Var& b);
Var div(const Var& a, const Var& b);
Var scale(const Var& x, float factor);  // factor · x
Var add_scalar(const Var& x, float value);
Var exp(const Var& x);
Var log(const Var& x);
Var sqrt(const Var& x);
Var rsqrt(const Var& x);  // 1 / sqrt(x)
Var relu(const Var& x);
Var gelu(const Var& x, GeluForm form = GeluForm::erf, ResultReaders readers = ResultReaders::any);
Var tanh(const Var& x);
Var sigmoid(const Var& x);

// ---- reduce.cpp -----------------------------------------------------------------------------------
Var sum(const Var& x, int axis, bool keepdim = false);
Var mean(const Var& x, int axis, bool keepdim = false);
Var max(const Var& x, int axis, bool keepdim = false);  // gradient flows to the first maximum
Var logsumexp(const Var& x, int axis, bool keepdim = false);
Var sum_all(const Var& x);  // a scalar of shape ()

// ---- softmax.cpp ----------------------------------------------------------------------------------
// softmax(x + mask) along any axis. mask is additive, not differentiable, broadcastable to x, and may
// be undefined; use large finite negatives (kMaskedScore), never -inf, so no row becomes NaN.
constexpr float kMaskedScore = -1e9f;
Var softmax(const Var& x, int axis, const Tensor& mask = Tensor());
Var log_softmax(const Var& x, int axis, const Tensor& mask = Tensor());

// ---- layer_norm.cpp -------------------------------------------------------------------------------
// Normalizes over the last axis: (x - mean) / sqrt(var + eps) · weight + bias (biased variance).
Var layer_norm(const Var& x, const Var& weight, const Var& bias, float eps = 1e-5f);
// layer_norm(dropout_add(residual, branch, p, rng), weight, bias, eps) fused (add for p = 0): a post-LN
// sublayer's end, one pass over the rows each way, the same mask as dropout_add's.
Var dropout_add_layer_norm(const Var& residual, const Var& branch, float p, Rng& rng, const Var& weight,
                           const Var& bias, float eps = 1e-5f);

// ---- dropout.cpp ----------------------------------------------------------------------------------
// Zeroes each value with probability p and scales the rest by 1/(1-p) (inverted dropout). The mask is
// a pure function of one draw from rng and the element index, so thread count does not change it.
Var dropout(const Var& x, float p, Rng& rng, ResultReaders readers = ResultReaders::any);
// residual + dropout(branch, p, rng) fused (same shapes): a transformer sublayer's residual sum.
Var dropout_add(const Var& residual, const Var& branch, float p, Rng& rng);

// ---- embedding.cpp --------------------------------------------------------------------------------
// Rows of weight (V, D) picked by int32 ids of any shape -> ids.shape + (D); backward scatter-adds.
Var embedding(const Var& weight, const Tensor& ids);

// ---- shape.cpp ------------------------------------------------------------------------------------
Var reshape(const Var& x, const Shape& shape);  // a view; one axis may be -1
Var transpose(const Var& x, int axis0, int axis1);
Var permute(const Var& x, const std::vector<int>& dims);
Var concat(const std::vector<Var>& xs, int axis);
std::vector<Var> split(const Var& x, const std::vector<int64_t>& sizes, int axis);
Var slice(const Var& x, int axis, int64_t start, int64_t end);  // [start, end) along axis

// ---- loss.cpp -------------------------------------------------------------------------------------
// Mean cross-entropy of logits (N, V) against int32 targets (N), fused with log-softmax. Targets equal
// to ignore_index count for nothing. With label smoothing ε the target distribution is
// (1-ε)·onehot + ε/V (PyTorch's convention); the mean runs over non-ignored targets.
Var cross_entropy(const Var& logits, const Tensor& targets, int ignore_index = -100, float label_smoothing = 0.0f);

// ---- attention ------------------------------------------------------------------------------------
// Score normalizations of attention: scores are (B, H, Lq, Lk); entry (b, h, i, j) is *allowed* when
// query i and key j are real and, if causal, j <= i + query_offset. Outputs are exactly 0 where not
// allowed, and a row or column with nothing allowed is all 0, never NaN.
struct AttentionMask {
    Tensor key_valid;          // (B, Lk) of 1 (real) / 0 (padding); undefined: every key is real
    Tensor query_valid;        // (B, Lq) likewise for queries
    bool causal = false;       // query i sees keys j <= i + query_offset
    int64_t query_offset = 0;  // absolute position of query 0 (incremental decoding)
};

// Scores (B, H, Lq, Lk), cut into B·H slices of Lq·Lk.
struct AttentionDims {
    int64_t batch, heads, queries, keys;
    int64_t slices() const { return batch * heads; }
    int64_t slice() const { return queries * keys; }
};

// A normalization run slice by slice (attention_slices.h): how a kind's kernels are made for scores of
// given dimensions, and the parameters they read (hnas: θ; nap: gain, bias), whose gradients they
// write. Each kind with fused kernels gives one (nn::AttentionNorm::slice_normalizer).
// The scores and weights, when the caller keeps them until the backward (undefined when it does not):
// a normalization reads them there instead of keeping copies.
struct KeptAttention {
    Tensor scores, weights;
};
class SliceNormalization;
struct SliceNormalizer {
    std::function<std::unique_ptr<SliceNormalization>(const AttentionDims&, const KeptAttention&)> make;
    std::vector<Var> parameters;
};
// The normalizer's weights for scores (B, H, Lq, Lk), each slice normalized by its kernels.
Var normalize_slices(const char* op, const Var& scores, const AttentionMask& mask, const SliceNormalizer& normalizer);
// blocked_attention.cpp: head_context(dropout(normalize_slices(head_scores(q, k, heads, alpha), mask,
// normalizer), p, rng, products), v, readers) computed one block of batch rows at a time while the
// block is in cache, for v (B, Tk, H·Kv): the same values and gradients, the same mask for the same rng.
Var blocked_attention(const Var& q, const Var& k, const Var& v, int64_t heads, float alpha, const AttentionMask& mask,
                      const SliceNormalizer& normalizer, float dropout, Rng& rng, ResultReaders readers = ResultReaders::any);

// One normalization step in log space: subtract the logsumexp over the allowed keys of each query
// (keys), over the allowed queries of each key (queries), or, per entry (i, j), over the allowed
// queries i' <= i of key j (queries_prefix: the causal doubly-normalized attention's first step).
enum class NormalizeAxis { keys, queries, queries_prefix };

// Fused kernels, one file each; forward and backward per (b, h) slice, with the log-normalizers and
// their adjoints in log_normalizers.cpp.
// normalize_attention.cpp: exp of the scores after the given log-normalization steps ({keys} is LNAS,
// {queries, keys} DNAS, k repetitions of that Sinkhorn-k, {queries_prefix, keys} causal DNAS).
Var normalize_attention(const Var& scores, const AttentionMask& mask, const std::vector<NormalizeAxis>& steps);
SliceNormalizer step_normalizer(const std::vector<NormalizeAxis>& steps);
// How a standardization divides the centred scores: by √(variance + eps), layer norm's form, or by
// σ + eps, the form of paper 002's code (normalize_masked in OliverRichter/normalized-attention, eps 1e-3).
enum class StandardizeDenominator { sqrt_variance_eps, std_plus_eps };
inline constexpr EnumName<StandardizeDenominator> kStandardizeDenominatorNames[]{
    {StandardizeDenominator::sqrt_variance_eps, "sqrt_variance_eps"}, {StandardizeDenominator::std_plus_eps, "std_plus_eps"}};
constexpr const auto& enum_names(StandardizeDenominator) { return kStandardizeDenominatorNames; }
struct Standardization {
    StandardizeDenominator denominator = StandardizeDenominator::sqrt_variance_eps;
    float eps = 1e-5f;
};
// standardize_attention.cpp: normalized attention pooling (paper 002, Eq. 1): per query, the allowed
// scores standardized with their mean and biased variance, then gain[h]·z + bias[h]; gain, bias (H).
Var standardize_attention(const Var& scores, const Var& gain, const Var& bias, const AttentionMask& mask,
                          const Standardization& form);
SliceNormalizer standardize_normalizer(const Var& gain, const Var& bias, const Standardization& form);
// unnormalized_attention.cpp: paper 002's NON (§4): the scores as weights, times 1/√n for a query with n
// allowed keys, 0 where not allowed.
Var unnormalized_attention(const Var& scores, const AttentionMask& mask);
SliceNormalizer unnormalized_normalizer();
// hybrid_attention.cpp: HNAS (paper 004, Alg. 1): u[h]·DNAS(S) + (1 − u[h])·LNAS(S), u = sigmoid(theta), theta (H).
Var hybrid_attention(const Var& scores, const Var& theta, const AttentionMask& mask);
SliceNormalizer hybrid_normalizer(const Var& theta);
// ot_attention.cpp: paper 003's optimal-transport attention (§9, Eq. 25): for query i and template t of
// the set A (the keys), P[i, t] = Σ_j u[i, j] · softmax_t(S[i, t] + G[t, j]) over the N input templates
// j (the first N keys), u[i, ·] the softmax of log_preference over the allowed inputs (uniform when it
// is undefined). scores S (B, H, Lq, A), similarity G (B, H, A, N), log_preference (B, H, Lq, N); a
// template absent from the input (t ≥ N) gets weight through G; no causal mask.
Var ot_attention(const Var& scores, const Var& similarity, const Var& log_preference, const AttentionMask& mask);

// attention_reference.cpp: the same normalizations composed from the generic ops above: slow and plain,
// the definitions each attention kind states beside its fused kernel (its reference()).
// 1 where allowed, 0 elsewhere, (B, 1, Lq, Lk) for scores of shape `scores`.
Tensor allowed_entries(const AttentionMask& mask, const Shape& scores);
// One log-normalization step: the masked log-softmax over keys or over queries, or per entry the score
// minus the logsumexp of its key's column over queries up to it.
Var log_normalize(const Var& L, const AttentionMask& mask, NormalizeAxis axis);
// exp(L), exactly 0 where not allowed.
Var masked_exp(const Var& L, const AttentionMask& mask);
// Per query, (S − mean) / √(variance + eps) or / (σ + eps) over the allowed keys (biased variance), 0 elsewhere.
Var masked_standardize(const Var& S, const AttentionMask& mask, const Standardization& form);
// ot_attention's Eq. 25 composed: the logits S[i, t] + G[t, j] as (B, H, Lq, N, A), softmaxed over the
// allowed templates, weighted by u[i, j] and summed over the inputs j.
Var ot_attention_reference(const Var& scores, const Var& similarity, const Var& log_preference, const AttentionMask& mask);

}  // namespace hnas::ops
