// Multi-head attention: q/k/v/output projections, scores for all heads from one batched product that
// reads the heads where the projections wrote them (ops::head_scores), then the configured
// normalization (nn/attention_norm.h) and, optionally, a learned relative-position prior added to the
// scores; the heads' outputs are written merged (ops::head_context). An open nn::AttentionProbe
// watching the attention receives what each forward pass computed (nn/attention_probe.h).
// Shapes: B batch, Tq queries, Tk keys, D model width, H heads, K = D/H head width.
#pragma once

#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "nn/attention_norm.h"
#include "nn/context_preference.h"
#include "nn/layers.h"
#include "nn/relative_position_bias.h"

namespace hnas::nn {

// The factor on QKᵀ before the normalization: 1/√K (Vaswani et al. 2017, as the papers trained) or 1
// (paper 000 Eq. 1-8 write exp(q·k); paper 002's code leaves NAP's scores unscaled, its standardization
// making any scale moot).
enum class ScoreScale { inv_sqrt_head_width, none };
inline constexpr EnumName<ScoreScale> kScoreScaleNames[]{{ScoreScale::inv_sqrt_head_width, "inv_sqrt_head_width"},
                                                         {ScoreScale::none, "none"}};
constexpr const auto& enum_names(ScoreScale) { return kScoreScaleNames; }

struct AttentionOptions {
    int64_t width = 0, heads = 0;
    float dropout = 0.0f;                  // on the attention weights
    std::string kind = default_attention_kind();  // a name from the registry
    KindSettingsPtr kind_settings;                // the kind's own (read_kind_settings); null: its defaults
    ScoreScale score_scale = ScoreScale::inv_sqrt_head_width;
    AttentionRole role = AttentionRole::bidirectional;
    // α of paper 003 Eq. 18 (and Eq. 25): the weight of the evidence z against the preference u; the
    // scores are α·QKᵀ·scale, and α = 1 is the scaled dot product.
    float alpha = 1.0f;
    // The preference priors log u, added to the scores before any normalization (for a kind that
    // compares templates: its preference), each when on: the learned relative-position prior (paper 003
    // Eq. 19) and the context-dependent preference (§7; not in causal self-attention, whose summary would
    // pool the future).
    std::optional<RelativePositionOptions> prior;
    std::optional<ContextPreferenceOptions> context_prior;
    // false: the values are the memory itself and the heads' merged output is the result (paper 004
    // App. B's multi-view attention, which found untransformed values better): no v or output projection.
    bool project_values = true;
};

// Paper 003 §9's template set beyond the input, drawn from the batch itself: row r also weighs the
// templates (keys and values) of row partner[r], masked by that row's key mask; −1: only its own. Only
// an attention whose kind compares templates (ot) takes them; every other sees its own row alone.
struct TemplatePartners {
    std::vector<int64_t> partner;  // one per batch row
};

// What a decoder attention keeps between the steps of step-by-step decoding.
struct AttentionCache {
    // (B, Tk, D): causal self-attention appends one position per step; cross-attention projects the
    // encoder memory once, a row of it that G consecutive query rows may read (beam search's beams of a
    // source: grouped queries, ops::head_scores).
    Tensor keys, values;
    Tensor norm_state;    // the normalization's own running state (AttentionNorm::normalize_step)
    Tensor preference;    // cross-attention's context preference (B, H, 1, Tk) a memory row, from the first step
    bool from_memory = false;  // keys, values and preference are the encoder memory's (cross-attention)
    // The rows of causal self-attention's keys and values that are kept, in order (empty: all, as they
    // are). keep_rows leaves them to the next step's append, which copies every cached position anyway:
    // a reorder then costs no copy of its own.
    std::vector<int64_t> pending_rows;
    // Keeps the given query rows, in that order (beam search's reordering of hypotheses), and of what
    // comes from the memory the given `memory_rows`, or all as they are when null; rows kept in place
    // copy nothing.
    void keep_rows(const std::vector<int64_t>& rows, const std::vector<int64_t>* memory_rows);
};

class MultiHeadAttention : public Module {
public:
    // With `projections_from`, the q/k/v/output projections are that attention's (registered there, not
    // here): one set of weights serving two attentions, each with its own normalization and role.
    MultiHeadAttention(const AttentionOptions& options, Rng& init_rng, Rng& dropout_rng,
                       const MultiHeadAttention* projections_from = nullptr);

    // query (B, Tq, D), memory (B, Tk, D) -> (B, Tq, D). The mask's causal flag must match the role.
    // With a cache (decoder attentions only), one decoding step: query (B, 1, D) at absolute position
    // mask.query_offset; causal self-attention takes the new position's keys and values from `memory`
    // (the query's own input) and attends over every cached position; cross-attention reuses the
    // memory's keys and values projected at the first step, and its memory (B/G, Tk, D) and mask may
    // hold a row for G consecutive query rows. `stack_prior`: the bias (1, H, Tq, Tk) of
    // a prior the whole stack shares (T5's), added to the scores; only for an attention without its own.
    // `partners`: extra templates for a kind that compares templates, appended after the memory's keys.
    Var forward(const Var& query, const Var& memory, const ops::AttentionMask& mask, AttentionCache* cache = nullptr,
                const Var& stack_prior = Var(), const TemplatePartners* partners = nullptr) const {
        return project_output(attend(query, memory, mask, cache, stack_prior, partners,
                                     out_proj_ ? ops::ResultReaders::products : ops::ResultReaders::any));
    }
    // forward() in its two parts: the heads' outputs merged, (B, Tq, D), and the output projection of
    // them. Paper 002's MTE block normalizes the merged heads in between (nn/transformer_layer.h).
    // `context_readers`: who reads the merged heads (ops::ResultReaders).
    Var attend(const Var& query, const Var& memory, const ops::AttentionMask& mask, AttentionCache* cache = nullptr,
               const Var& stack_prior = Var(), const TemplatePartners* partners = nullptr,
               ops::ResultReaders context_readers = ops::ResultReaders::any) const;
    Var project_output(const Var& merged) const { return out_proj_ ? out_proj_->forward(merged) : merged; }
    // Fills a decoder cross-attention's cache from the encoder memory (B, S, D): its keys, values and
    // context preference, which every later step reuses. The first decoding step does it if no one has;
    // start_decoding does it once a source, whose beams then read that row (grouped queries).
    void cache_memory(const Var& memory, const ops::AttentionMask& mask, AttentionCache& cache) const;

    const Linear& query_projection() const { return q_proj_; }
    const Linear& key_projection() const { return k_proj_; }
    float alpha() const { return alpha_; }
    float score_scale() const { return score_scale_; }
    std::vector<HeadValues> head_values() const { return norm_.head_values(); }
    const std::string& kind() const { return kind_; }
    bool compares_templates() const { return compares_templates_; }
    AttentionRole role() const { return role_; }
    int64_t width() const { return width_; }
    int64_t heads() const { return heads_; }
    bool projects_values() const { return v_proj_ != nullptr; }

private:
    std::pair<Var, Var> keys_and_values(const Var& query, const Var& memory, AttentionCache* cache) const;
    // The bias (1, H, Tq, Tk) of this attention's prior, or of the stack's; undefined without either.
    Var prior_bias(int64_t queries, int64_t keys, const ops::AttentionMask& mask, const Var& stack_prior) const;
    // log u over the memory's keys from every prior that is on: (1 or B, H, Tq or 1, Tk); undefined
    // with none.
    Var preference(const Var& memory, const ops::AttentionMask& mask, int64_t queries, int64_t keys, AttentionCache* cache,
                   const Var& stack_prior) const;

    int64_t width_, heads_;
    float score_scale_;
    float alpha_;
    std::string kind_;
    bool compares_templates_;  // the kind weighs templates by their similarity (ot)
    AttentionRole role_;
    const Linear& q_proj_;
    const Linear& k_proj_;
    const Linear* v_proj_ = nullptr;    // null without project_values
    const Linear* out_proj_ = nullptr;
    AttentionNorm& norm_;
    RelativePositionBias* prior_ = nullptr;
    ContextPreference* context_prior_ = nullptr;
    Dropout& attention_dropout_;
};

}  // namespace hnas::nn
