// ot_attention: paper 003's optimal-transport attention (§9, Eq. 25) in one kernel. For query i over the
// template set A (the keys of `scores`, of which the first N are the input's templates j):
//   P[i, t] = Σ_j u[i, j] · exp(S[i, t] + G[t, j] − log Z[i, j]),   log Z[i, j] = logsumexp_t (S[i, t] + G[t, j]),
// t and j over the allowed keys. The caller scales: S = α⟨t, z_i⟩/γ and G = −M(t, t_j)/γ, which for
// the paper's cost M(a, b) = −⟨a, b⟩ + C is ⟨t, t_j⟩/γ (C cancels inside each Z). The backward pass
// rebuilds every exp(· − log Z) from the stored log Z rather than keeping Lq · N · |A| weights.
// Its composed definition is ot_attention_reference (attention_reference.cpp).
#include <cmath>

#include "ops/attention_slices.h"
#include "ops/log_normalizers.h"

namespace hnas::ops {

namespace {

// One slice's shapes: `scores` (Lq, A) of AttentionDims, the similarity (A, N).
struct OtDims {
    AttentionDims scores;
    int64_t inputs;  // N
    int64_t templates() const { return scores.keys; }
};

// u[i, ·]: softmax of the preference over query i's allowed input templates (uniform without one), 0
// elsewhere; returns false when the query has none.
bool preference_row(const float* log_preference, const SliceMask& mask, int64_t inputs, float* u) {
    int64_t allowed = 0;
    for (int64_t j = 0; j < inputs; ++j) {
        const bool real = mask.key_real(j);
        u[j] = real ? (log_preference ? log_preference[j] : 0.0f) : kMinusInfinity;
        allowed += real ? 1 : 0;
    }
    if (allowed == 0) {
        std::fill(u, u + inputs, 0.0f);
        return false;
    }
    softmax_row(u, inputs, u);
    return true;
}

// r_t = S[i, t] + G[t, j] over the allowed templates, -inf elsewhere.
void template_logits(const float* S_row, const float* G, int64_t j, const SliceMask& mask, const OtDims& d, float* r) {
    for (int64_t t = 0; t < d.templates(); ++t) r[t] = mask.key_real(t) ? S_row[t] + G[t * d.inputs + j] : kMinusInfinity;
}

void ot_attention_forward(const float* S, const float* G, const float* log_preference, const SliceMask& mask,
                          const OtDims& d, float* P, float* log_z, float* u, SliceScratch& scratch) {
    const int64_t A = d.templates(), N = d.inputs;
    float* r = SliceScratch::sized(scratch.log_values, A);
    float* w = SliceScratch::sized(scratch.exp_values, A);
    std::fill(P, P + d.scores.slice(), 0.0f);
    std::fill(log_z, log_z + d.scores.queries * N, 0.0f);
    for (int64_t i = 0; i < d.scores.queries; ++i) {
        float* u_row = u + i * N;
        const bool attends = mask.query_real(i) &&
                             preference_row(log_preference ? log_preference + i * N : nullptr, mask, N, u_row);
        if (!attends) {
            std::fill(u_row, u_row + N, 0.0f);
            continue;
        }
        for (int64_t j = 0; j < N; ++j) {
            if (u_row[j] == 0.0f) continue;  // not an allowed input template (or a preference that underflowed)
            template_logits(S + i * A, G, j, mask, d, r);
            log_z[i * N + j] = softmax_row(r, A, w);  // Eq. 25: Z_i over every template of A
#pragma omp simd
            for (int64_t t = 0; t < A; ++t) P[i * A + t] += u_row[j] * w[t];
        }
    }
}

// dS (Lq, A), dG (A, N) and d log_preference (Lq, N), each null when not wanted.
struct OtGradients {
    float* scores;
    float* similarity;
    float* preference;
    bool accumulate_scores, accumulate_similarity, accumulate_preference;
};

void ot_attention_backward(const float* g, const float* S, const float* G, const float* log_z, const float* u,
                           const SliceMask& mask, const OtDims& d, const OtGradients& out, SliceScratch& scratch) {
    const int64_t A = d.templates(), N = d.inputs;
    float* w = SliceScratch::sized(scratch.exp_values, A);
    float* dS = SliceScratch::sized(scratch.gradient, A);
    float* du = SliceScratch::sized(scratch.per_key, N);
    if (out.similarity && !out.accumulate_similarity) std::fill(out.similarity, out.similarity + A * N, 0.0f);
    for (int64_t i = 0; i < d.scores.queries; ++i) {
        const float* g_row = g + i * A;
        const float* u_row = u + i * N;
        std::fill(dS, dS + A, 0.0f);
        std::fill(du, du + N, 0.0f);
        for (int64_t j = 0; j < N; ++j) {
            if (u_row[j] == 0.0f) continue;
            // forward: w = exp(S[i, ·] + G[·, j] − log Z[i, j]), P[i, ·] += u_j · w
            float dot = 0.0f;
            for (int64_t t = 0; t < A; ++t) {
                w[t] = mask.key_real(t) ? kernels::fast_exp(S[i * A + t] + G[t * N + j] - log_z[i * N + j]) : 0.0f;
                dot += w[t] * g_row[t];
            }
            du[j] = dot;
            // w is a softmax over t of r = S[i, ·] + G[·, j], so dr = u_j · w ⊙ (g − Σ_t w g); r feeds both S and G
            for (int64_t t = 0; t < A; ++t) {
                const float dr = u_row[j] * w[t] * (g_row[t] - dot);
                dS[t] += dr;
                if (out.similarity) out.similarity[t * N + j] += dr;
            }
        }
        if (out.scores) {
            for (int64_t t = 0; t < A; ++t) write_gradient(out.scores[i * A + t], dS[t], out.accumulate_scores);
        }
        if (out.preference) {
            // forward: u = softmax_j(log_preference) over the allowed inputs, so d log_preference = u ⊙ (du − Σ_j u du)
            float mean = 0.0f;
            for (int64_t j = 0; j < N; ++j) mean += u_row[j] * du[j];
            for (int64_t j = 0; j < N; ++j) {
                write_gradient(out.preference[i * N + j], u_row[j] * (du[j] - mean), out.accumulate_preference);
            }
        }
    }
}

}  // namespace

Var ot_attention(const Var& scores, const Var& similarity, const Var& log_preference, const AttentionMask& mask) {
    const AttentionDims d = check_attention_shapes(scores, mask, "ot_attention");
    HNAS_CHECK(similarity.rank() == 4 && similarity.dim(0) == d.batch && similarity.dim(1) == d.heads &&
                   similarity.dim(2) == d.keys && similarity.dim(3) >= 1 && similarity.dim(3) <= d.keys,
               "ot_attention: similarity ", shape_str(similarity.shape()), " must be (B, H, A, N) with 1 ≤ N ≤ A for scores ",
               shape_str(scores.shape()));
    const OtDims dims{d, similarity.dim(3)};
    const int64_t N = dims.inputs;
    const bool preferred = log_preference.defined();
    HNAS_CHECK(!preferred || (log_preference.shape() == Shape{d.batch, d.heads, d.queries, N}), "ot_attention: log_preference ",
               shape_str(log_preference.shape()), " must be (B, H, Lq, N) = (", d.batch, ", ", d.heads, ", ", d.queries, ", ",
               N, ")");
    HNAS_CHECK(!mask.causal, "ot_attention: every query sees the whole template set, so it takes no causal mask");
    Tensor weights = Tensor::empty(scores.shape());
    Tensor log_z = Tensor::empty({d.slices(), d.queries, N}), u = Tensor::empty({d.slices(), d.queries, N});
    const int64_t n = d.slice(), similarity_slice = d.keys * N, preference_slice = d.queries * N;
    for_each_slice(d, [&](int64_t s, SliceScratch& scratch) {
        ot_attention_forward(scores.value().data() + s * n, similarity.value().data() + s * similarity_slice,
                             preferred ? log_preference.value().data() + s * preference_slice : nullptr,
                             SliceMask(mask, d, s / d.heads), dims, weights.data() + s * n, log_z.data() + s * preference_slice,
                             u.data() + s * preference_slice, scratch);
    });
    std::vector<Var> inputs{scores, similarity};
    if (preferred) inputs.push_back(log_preference);
    const Tensor S = scores.value(), G = similarity.value();
    return make_result("ot_attention", weights, inputs, [=](const Tensor& dy, GradSink& sink) {
        WantedGradient dscores = wanted_gradient(sink, 0), dsimilarity = wanted_gradient(sink, 1);
        WantedGradient dpreference = preferred ? wanted_gradient(sink, 2) : WantedGradient{};
        for_each_slice(d, [&](int64_t s, SliceScratch& scratch) {
            const OtGradients out{dscores.slice(s, n),       dsimilarity.slice(s, similarity_slice),
                                  dpreference.slice(s, preference_slice), dscores.accumulate,
                                  dsimilarity.accumulate,    dpreference.accumulate};
            ot_attention_backward(dy.data() + s * n, S.data() + s * n, G.data() + s * similarity_slice,
                                  log_z.data() + s * preference_slice,
                                  u.data() + s * preference_slice, SliceMask(mask, d, s / d.heads), dims, out, scratch);
        });
    });
}

}  // namespace hnas::ops
