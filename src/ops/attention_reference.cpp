// The attention normalizations composed from generic ops: what the fused kernels compute, written the
// plain way. Masked entries enter the softmaxes as kMaskedScore; a row or column with nothing allowed
// therefore comes out finite (uniform over masked entries) and masked_exp zeroes it.
#include "ops/attention_slices.h"

namespace hnas::ops {

Tensor allowed_entries(const AttentionMask& mask, const Shape& scores) {
    HNAS_CHECK(scores.size() == 4, "allowed_entries: scores must be (B, H, Lq, Lk), got ", shape_str(scores));
    const AttentionDims d{scores[0], scores[1], scores[2], scores[3]};
    Tensor out = Tensor::empty({d.batch, 1, d.queries, d.keys});
    for (int64_t b = 0; b < d.batch; ++b) {
        const SliceMask slice(mask, d, b);
        for (int64_t i = 0; i < d.queries; ++i)
            for (int64_t j = 0; j < d.keys; ++j) out.data()[(b * d.queries + i) * d.keys + j] = slice.allowed(i, j) ? 1.0f : 0.0f;
    }
    return out;
}

namespace {
// 0 where `allowed` holds 1, kMaskedScore where it holds 0.
Tensor additive(const Tensor& allowed) {
    Tensor out = Tensor::empty(allowed.shape());
    for (int64_t e = 0; e < out.numel(); ++e) out.data()[e] = allowed.data()[e] > 0.5f ? 0.0f : kMaskedScore;
    return out;
}

Tensor additive_mask(const AttentionMask& mask, const Shape& scores) { return additive(allowed_entries(mask, scores)); }
}  // namespace

Var log_normalize(const Var& L, const AttentionMask& mask, NormalizeAxis axis) {
    const Tensor additive = additive_mask(mask, L.shape());
    switch (axis) {
        case NormalizeAxis::keys: return log_softmax(L, -1, additive);
        case NormalizeAxis::queries: return log_softmax(L, -2, additive);
        case NormalizeAxis::queries_prefix: {
            const Var masked = add(L, Var(additive));
            std::vector<Var> rows;
            for (int64_t i = 0; i < L.dim(2); ++i) {
                const Var prefix = logsumexp(slice(masked, 2, 0, i + 1), 2, true);  // (B, H, 1, Lk)
                rows.push_back(sub(slice(masked, 2, i, i + 1), prefix));
            }
            return concat(rows, 2);
        }
    }
    return L;
}

Var masked_exp(const Var& L, const AttentionMask& mask) { return mul(exp(L), Var(allowed_entries(mask, L.shape()))); }

Var masked_standardize(const Var& S, const AttentionMask& mask, const Standardization& form) {
    const Var allowed(allowed_entries(mask, S.shape()));
    const Var count = add_scalar(sum(allowed, -1, true), 1e-20f);  // no division by 0 for empty rows
    const Var centered = mul(sub(S, div(sum(mul(S, allowed), -1, true), count)), allowed);
    const Var variance = div(sum(mul(centered, centered), -1, true), count);
    if (form.denominator == StandardizeDenominator::sqrt_variance_eps) return mul(centered, rsqrt(add_scalar(variance, form.eps)));
    // σ = √variance; the 1e-30 only keeps √'s derivative finite where every allowed score is equal
    // (there the centred scores, and so their gradient through σ, are 0).
    return div(centered, add_scalar(sqrt(add_scalar(variance, 1e-30f)), form.eps));
}

Var ot_attention_reference(const Var& scores, const Var& similarity, const Var& log_preference, const AttentionMask& mask) {
    const int64_t B = scores.dim(0), H = scores.dim(1), Lq = scores.dim(2), A = scores.dim(3), N = similarity.dim(3);
    // No causal mask: a real query is allowed every real template, and the input templates are the first N.
    const Tensor allowed = allowed_entries(mask, scores.shape());                                       // (B, 1, Lq, A)
    const Tensor inputs = slice(Var(allowed), 3, 0, N).value().reshape({B, 1, Lq, N, 1});
    const Var logits = add(reshape(scores, {B, H, Lq, 1, A}), reshape(permute(similarity, {0, 1, 3, 2}), {B, H, 1, N, A}));
    const Var per_input = softmax(logits, -1, additive(allowed).reshape({B, 1, Lq, 1, A}));  // Eq. 25's exp(·)/Z_j
    const Var u = log_preference.defined()
                      ? mul(softmax(reshape(log_preference, {B, H, Lq, N, 1}), 3, additive(inputs)), Var(inputs))
                      : div(Var(inputs), add_scalar(sum(Var(inputs), 3, true), 1e-20f));  // uniform over the allowed inputs
    return mul(sum(mul(per_input, u), 3), Var(allowed));
}

}  // namespace hnas::ops
