// The attention normalization family: how a layer turns scores S = QKᵀ/√d (+ prior) into weights.
// Each kind is one file in nn/attention_kinds/ and one line in its registry (registry.cpp); model code
// asks the registry by name and never branches on the kind.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "base/enum_names.h"
#include "nn/module.h"
#include "ops/ops.h"

namespace hnas::nn {

// hnas: one trainable u per head (paper 004, Eq. 12) or one per layer, shared by its heads (paper 000
// §6: "a trainable variable u_l").
enum class HybridPer { head, layer };
inline constexpr EnumName<HybridPer> kHybridPerNames[]{{HybridPer::head, "head"}, {HybridPer::layer, "layer"}};
constexpr const auto& enum_names(HybridPer) { return kHybridPerNames; }

// Settings a kind may read; each kind uses only its own.
struct AttentionNormOptions {
    int64_t heads = 1;
    float hybrid_init = 0.5f;   // hnas: the initial u = sigmoid(θ) of every head, in (0, 1)
    HybridPer hybrid_per = HybridPer::head;
    int iterations = 3;         // sinkhorn: alternations of query- and key-axis normalization
    ops::Standardization nap;   // nap: √(variance + eps) or σ + eps as the divisor
};

// What a kind normalizes: the scores S = QKᵀ·scale, (B, H, Lq, Lk). A kind that compares the templates
// (the keys) with each other (registry flag compares_templates: paper 003's ot) also reads their
// similarity ⟨k_t, k_j⟩·scale to the N input templates (the first N keys), (B, H, Lk, N), and takes
// the prior as its preference u, (B, H, Lq, N) in log space; every other kind finds the prior added
// to its scores.
struct AttentionScores {
    AttentionScores(Var scores_) : scores(std::move(scores_)) {}  // NOLINT(google-explicit-constructor): most kinds read the scores alone
    AttentionScores(Var scores_, Var similarity_, Var log_preference_)
        : scores(std::move(scores_)), similarity(std::move(similarity_)), log_preference(std::move(log_preference_)) {}
    Var scores;
    Var similarity;      // compares_templates kinds only
    Var log_preference;  // compares_templates kinds only; undefined: uniform over the allowed input templates
};

// A named per-head quantity a kind reports for analysis (hnas: u; nap: gain and bias).
struct HeadValues {
    std::string name;
    std::vector<float> values;
};

class AttentionNorm : public Module {
public:
    // scores (B, H, Lq, Lk) -> weights (B, H, Lq, Lk), exactly 0 where the mask disallows.
    virtual Var normalize(const AttentionScores& in, const ops::AttentionMask& mask) const = 0;
    // The kind's definition composed from generic ops: what normalize() computes, slowly and plainly.
    // Tests hold the two equal, forward and backward, for every kind in every role it may run in.
    virtual Var reference(const AttentionScores& in, const ops::AttentionMask& mask) const = 0;
    // Step-by-step decoding: the weights (B, H, 1, Lk) of the newest query from its scores, given
    // `state`, which the kind keeps across steps (undefined at the first step). Only decoder attentions
    // decode step by step, and only kinds that never use later queries may run there
    // (check_attention_kind_allowed), so the default, which normalizes the query's row alone, is exact
    // for every kind whose weights of a query depend on that query's scores only (lnas, nap).
    virtual Var normalize_step(const AttentionScores& in, const ops::AttentionMask& mask, Tensor& /*state*/) const {
        return normalize(in, mask);
    }
    virtual std::vector<HeadValues> head_values() const { return {}; }
};

// Where an attention runs: bidirectional (encoder self-attention, or cross-attention whose queries may
// all see each other), causal self-attention, or a decoder's cross-attention. Kinds whose weights for
// query i depend on later queries are invalid where a query must not see the future: the last two.
enum class AttentionRole { bidirectional, causal_self, decoder_cross };
inline constexpr EnumName<AttentionRole> kAttentionRoleNames[]{{AttentionRole::bidirectional, "bidirectional attention"},
                                                               {AttentionRole::causal_self, "causal decoder self-attention"},
                                                               {AttentionRole::decoder_cross, "decoder cross-attention"}};
constexpr const auto& enum_names(AttentionRole) { return kAttentionRoleNames; }

struct AttentionKind {
    std::string name;
    std::string description;
    // Why the kind cannot run where a query must not see the future (causal self-attention, decoder
    // cross-attention); empty where it can.
    std::string future_leak;
    bool rows_sum_to_one;     // each real query's weights are a distribution over its allowed keys
    bool compares_templates;  // reads AttentionScores::similarity and takes the prior as its preference
    std::function<std::unique_ptr<AttentionNorm>(const AttentionNormOptions&)> make;
};

const std::vector<AttentionKind>& attention_kinds();
std::vector<std::string> attention_kind_names();  // in registry order
// The kind called `name`; throws listing the known kinds.
const AttentionKind& find_attention_kind(const std::string& name);
// Throws, explaining why and naming the causal alternative, when `name` may not run in `role`.
void check_attention_kind_allowed(const std::string& name, AttentionRole role);

}  // namespace hnas::nn
