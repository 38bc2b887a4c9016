// The attention normalization family: how a layer turns scores S = QKᵀ/√d (+ prior) into weights.
// Each kind is one file in nn/attention_kinds/ (its normalization, its settings and their config keys)
// and one line in its registry (registry.cpp); model code asks the registry by name and never branches
// on the kind.
#pragma once

#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "base/check.h"
#include "base/config_node.h"
#include "base/enum_names.h"
#include "nn/module.h"
#include "ops/ops.h"

namespace hnas::nn {

// A kind's own settings: each kind's file defines its struct (the initializers are the defaults), reads
// its config keys from an attention stack's node and checks them (AttentionKind::read_settings).
struct KindSettings {
    virtual ~KindSettings() = default;
    // A warning for an optimizer that scales each tensor's step by the tensor's norm (LAMB's trust ratio),
    // when that would hold one of the kind's parameters where it starts; `stack` is the stack's config
    // path ("model.attention.encoder").
    virtual std::optional<std::string> trust_ratio_warning(const std::string& /*stack*/) const { return std::nullopt; }
};
using KindSettingsPtr = std::shared_ptr<const KindSettings>;

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
    // The kind's fused kernels slice by slice, which attention runs one block of rows at a time while
    // the block is in cache (ops::blocked_attention); none: the kind runs composed, normalize() on the
    // whole scores tensor.
    virtual std::optional<ops::SliceNormalizer> slice_normalizer() const { return std::nullopt; }
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
    bool softmax_of_scores;   // the weights are the softmax over keys of the scores (paper 003 Eq. 18's form)
    // Reads the kind's keys from an attention stack's config node; each key's default is its settings
    // struct's.
    KindSettingsPtr (*read_settings)(config::ConfigNode& stack);
    // The normalization of one attention with `heads` heads; `settings` are what read_settings returned.
    std::unique_ptr<AttentionNorm> (*make)(const KindSettings& settings, int64_t heads);
};

// AttentionKind::read_settings of a kind without settings.
KindSettingsPtr no_settings(config::ConfigNode& stack);
// AttentionKind::future_leak of a kind that normalizes over all queries at once (dnas, hnas, sinkhorn).
extern const char* const kLeaksOverQueries;

// Every kind in the registry's order (registry.cpp); the first is the default kind.
const std::vector<const AttentionKind*>& attention_kinds();
std::vector<std::string> attention_kind_names();  // in registry order
const std::string& default_attention_kind();
// The kind called `name`; throws listing the known kinds.
const AttentionKind& find_attention_kind(const std::string& name);
// Throws, explaining why and naming the causal alternative, when `name` may not run in `role`.
void check_attention_kind_allowed(const std::string& name, AttentionRole role);

// Every kind's settings for one attention stack, by kind name.
using KindSettingsByName = std::map<std::string, KindSettingsPtr, std::less<>>;
// Reads every kind's keys from an attention stack's node, in registry order.
KindSettingsByName read_kind_settings(config::ConfigNode& stack);
// One kind's settings from a JSON object of its keys (other keys are errors); {}: its defaults.
KindSettingsPtr kind_settings(const std::string& kind, const Json& keys = Json::object());

// `settings` as the kind's own struct: what a kind's make() does with the settings it is given.
template <class Settings>
const Settings& settings_as(const KindSettings& settings, const char* kind) {
    const auto* own = dynamic_cast<const Settings*>(&settings);
    HNAS_CHECK(own != nullptr, "attention kind '", kind, "' was given another kind's settings");
    return *own;
}

}  // namespace hnas::nn
