#include "nn/attention.h"

#include <algorithm>
#include <cmath>

#include "backend/kernels.h"
#include "nn/attention_intervention.h"
#include "nn/attention_probe.h"

namespace hnas::nn {

namespace {
// The normalization of `options.kind` with its settings (the kind's defaults when none are given).
std::unique_ptr<AttentionNorm> make_normalization(const AttentionOptions& options) {
    const AttentionKind& kind = find_attention_kind(options.kind);
    return kind.make(options.kind_settings ? *options.kind_settings : *kind_settings(kind.name), options.heads);
}

// A checked copy of the options: the kind must exist and be allowed in this role, and an attention
// whose projections it shares must have the same ones.
const AttentionOptions& validated(const AttentionOptions& options, const MultiHeadAttention* projections_from) {
    HNAS_CHECK(options.heads > 0 && options.width % options.heads == 0, "attention: width ", options.width,
               " is not divisible by ", options.heads, " heads");
    check_attention_kind_allowed(options.kind, options.role);
    HNAS_CHECK(!options.context_prior || options.role != AttentionRole::causal_self, "attention: the context prior pools ",
               "every position into its summary, which causal self-attention must not see");
    HNAS_CHECK(options.alpha > 0.0f, "attention: α ", options.alpha, " must be positive");
    HNAS_CHECK(!projections_from || (projections_from->width() == options.width &&
                                     projections_from->heads() == options.heads &&
                                     projections_from->projects_values() == options.project_values),
               "attention: cannot share the projections of an attention of another width, head count or value projection");
    return options;
}

std::unique_ptr<Linear> projection(int64_t width, Rng& init_rng) { return std::make_unique<Linear>(width, width, init_rng); }
}  // namespace

MultiHeadAttention::MultiHeadAttention(const AttentionOptions& options, Rng& init_rng, Rng& dropout_rng,
                                       const MultiHeadAttention* from)
    : width_(validated(options, from).width),
      heads_(options.heads),
      score_scale_(options.score_scale == ScoreScale::none ? 1.0f : 1.0f / std::sqrt(static_cast<float>(width_ / heads_))),
      alpha_(options.alpha),
      kind_(options.kind),
      compares_templates_(find_attention_kind(options.kind).compares_templates),
      role_(options.role),
      q_proj_(register_or_share("q_proj", from ? &from->q_proj_ : nullptr, [&] { return projection(width_, init_rng); })),
      k_proj_(register_or_share("k_proj", from ? &from->k_proj_ : nullptr, [&] { return projection(width_, init_rng); })),
      v_proj_(options.project_values ? &register_or_share("v_proj", from ? from->v_proj_ : nullptr, [&] { return projection(width_, init_rng); })
                                     : nullptr),
      out_proj_(options.project_values
                    ? &register_or_share("out_proj", from ? from->out_proj_ : nullptr, [&] { return projection(width_, init_rng); })
                    : nullptr),
      norm_(register_module("norm", make_normalization(options))),
      attention_dropout_(register_module("dropout", std::make_unique<Dropout>(options.dropout, dropout_rng))) {
    if (options.prior) prior_ = &register_module("relative_bias", std::make_unique<RelativePositionBias>(heads_, *options.prior));
    if (options.context_prior) {
        context_prior_ = &register_module("context_prior",
                                          std::make_unique<ContextPreference>(width_, heads_, *options.context_prior, init_rng));
    }
}

namespace {

// Whether keeping `rows` of a batch of `count` rows keeps every row where it is.
bool keeps_rows_in_place(const std::vector<int64_t>& rows, int64_t count) {
    if (static_cast<int64_t>(rows.size()) != count) return false;
    for (size_t i = 0; i < rows.size(); ++i)
        if (rows[i] != static_cast<int64_t>(i)) return false;
    return true;
}

// Each row of `x` `times` times, in order: a memory row's share for each of its G query rows.
Tensor each_row_repeated(const Tensor& x, int64_t times) {
    std::vector<int64_t> rows;
    rows.reserve(static_cast<size_t>(x.dim(0) * times));
    for (int64_t row = 0; row < x.dim(0); ++row) rows.insert(rows.end(), static_cast<size_t>(times), row);
    return x.take_rows(rows);
}

// The cached (B, T, D) positions of `rows` (all rows when empty), each followed by its row of `added`
// (rows.size(), 1, D): causal self-attention's append with beam search's pending reorder in one copy.
Tensor append_position(const Tensor& cached, const std::vector<int64_t>& rows, const Tensor& added) {
    const int64_t count = rows.empty() ? cached.dim(0) : static_cast<int64_t>(rows.size());
    const int64_t positions = cached.dim(1), width = cached.dim(2);
    HNAS_CHECK(added.shape() == (Shape{count, 1, width}), "attention cache: appending ", shape_str(added.shape()),
               " to ", count, " rows of ", shape_str(cached.shape()));
    Tensor out = Tensor::empty({count, positions + 1, width});
    const float* from = cached.data();
    const float* new_position = added.data();
    float* to = out.data();
    const auto row_floats = static_cast<size_t>(positions * width);
#pragma omp parallel for schedule(static) if (count * positions * width >= kernels::kParallelGrain)
    for (int64_t i = 0; i < count; ++i) {
        const int64_t row = rows.empty() ? i : rows[static_cast<size_t>(i)];
        std::copy_n(from + row * positions * width, row_floats, to + i * (positions + 1) * width);
        std::copy_n(new_position + i * width, width, to + (i * (positions + 1) + positions) * width);
    }
    return out;
}

}  // namespace

void AttentionCache::keep_rows(const std::vector<int64_t>& rows, const std::vector<int64_t>* memory_rows) {
    if (keys.defined() && !from_memory) {
        const int64_t count = pending_rows.empty() ? keys.dim(0) : static_cast<int64_t>(pending_rows.size());
        if (!keeps_rows_in_place(rows, count)) {
            std::vector<int64_t> kept(rows.size());
            for (size_t i = 0; i < rows.size(); ++i) {
                HNAS_CHECK(rows[i] >= 0 && rows[i] < count, "attention cache: row ", rows[i], " of ", count, " rows");
                kept[i] = pending_rows.empty() ? rows[i] : pending_rows[static_cast<size_t>(rows[i])];
            }
            pending_rows = std::move(kept);
        }
    }
    if (norm_state.defined() && !keeps_rows_in_place(rows, norm_state.dim(0))) norm_state = norm_state.take_rows(rows);
    if (!from_memory || memory_rows == nullptr) return;
    for (Tensor* tensor : {&keys, &values, &preference}) {
        if (!tensor->defined() || keeps_rows_in_place(*memory_rows, tensor->dim(0))) continue;
        *tensor = tensor->take_rows(*memory_rows);
    }
}

Var MultiHeadAttention::prior_bias(int64_t queries, int64_t keys, const ops::AttentionMask& mask, const Var& stack_prior) const {
    HNAS_CHECK(!prior_ || !stack_prior.defined(), "attention: a stack's prior given to an attention with a prior of its own");
    if (prior_) return prior_->forward(queries, keys, mask.query_offset);
    if (!stack_prior.defined()) return Var();
    HNAS_CHECK(stack_prior.shape() == (Shape{1, heads_, queries, keys}), "attention: the stack's prior ",
               shape_str(stack_prior.shape()), " must be (1, ", heads_, ", ", queries, ", ", keys, ") for ", queries,
               " queries and ", keys, " keys");
    return stack_prior;
}

Var MultiHeadAttention::preference(const Var& memory, const ops::AttentionMask& mask, int64_t queries, int64_t keys,
                                   AttentionCache* cache, const Var& stack_prior) const {
    const Var position = prior_bias(queries, keys, mask, stack_prior);
    if (!context_prior_) return position;
    Var context;
    if (cache && cache->preference.defined()) {
        context = Var(cache->preference);
    } else {
        context = context_prior_->forward(memory, mask.key_valid);  // (B, H, 1, Tk)
        if (cache) cache->preference = context.value();
    }
    return position.defined() ? ops::add(position, context) : context;
}

namespace {
// Paper 003 §9: each row's memory followed by its partner row's, (B, 2·Tk, D), and the key mask of both
// (a row without a partner has its second half masked).
struct WithPartners {
    Var memory;
    ops::AttentionMask mask;
};
WithPartners append_partner_templates(const Var& memory, const ops::AttentionMask& mask, const TemplatePartners& partners) {
    const int64_t rows = memory.dim(0), keys = memory.dim(1);
    HNAS_CHECK(static_cast<int64_t>(partners.partner.size()) == rows, "attention: ", partners.partner.size(),
               " template partners for a batch of ", rows, " rows");
    const Tensor valid = mask.key_valid.defined() ? mask.key_valid : Tensor::full({rows, keys}, 1.0f);
    std::vector<Var> extra_rows;
    Tensor extra_valid = Tensor::zeros({rows, keys});
    for (int64_t row = 0; row < rows; ++row) {
        const int64_t partner = partners.partner[static_cast<size_t>(row)];
        HNAS_CHECK(partner >= -1 && partner < rows && partner != row, "attention: row ", row, "'s template partner ", partner,
                   " is not another row of the batch of ", rows, " (or −1)");
        if (partner < 0) {
            extra_rows.emplace_back(Tensor::zeros({1, keys, memory.dim(2)}));
            continue;
        }
        extra_rows.push_back(ops::slice(memory, 0, partner, partner + 1));
        std::copy_n(valid.data() + partner * keys, keys, extra_valid.data() + row * keys);
    }
    WithPartners out{ops::concat({memory, ops::concat(extra_rows, 0)}, 1), mask};
    out.mask.key_valid = ops::concat({Var(valid), Var(extra_valid)}, 1).value();
    return out;
}

// The weights as an open intervention changes them (nn/attention_intervention.h), or as they are.
Var intervened(const MultiHeadAttention& attention, const Var& weights, const Var& scores, const ops::AttentionMask& mask) {
    const AttentionIntervention::Change* change = AttentionIntervention::change_for(attention);
    if (change == nullptr) return weights;
    HNAS_CHECK(!grad_enabled(), "attention: an intervention changes the weights of evaluation only (NoGradScope)");
    Tensor changed = (*change)(weights.value(), scores.value(), mask);
    HNAS_CHECK(changed.shape() == weights.shape(), "attention intervention: weights ", shape_str(changed.shape()),
               " for weights ", shape_str(weights.shape()));
    return Var(std::move(changed));
}
}  // namespace

// The keys and values (B, Tk, D) of `memory`: read by the head products alone, but a decoding cache
// appends keys and values, and comparing templates slices the keys.
std::pair<Var, Var> MultiHeadAttention::keys_and_values(const Var& query, const Var& memory, AttentionCache* cache) const {
    if (!cache) {
        using ops::ResultReaders;
        const ResultReaders readers = compares_templates_ ? ResultReaders::any : ResultReaders::products;
        return {k_proj_.forward(memory, readers), v_proj_ ? v_proj_->forward(memory, readers) : memory};
    }
    HNAS_CHECK(role_ != AttentionRole::bidirectional && query.dim(1) == 1, "attention: step-by-step decoding takes ",
               "one query position in a decoder attention, got ", shape_str(query.shape()), " in ", name_of(role_));
    if (role_ == AttentionRole::causal_self) {
        const Var new_keys = k_proj_.forward(memory), new_values = v_proj_ ? v_proj_->forward(memory) : memory;
        if (cache->keys.defined()) {
            HNAS_CHECK(!grad_enabled(), "attention: step-by-step decoding runs without gradients (NoGradScope)");
            cache->keys = append_position(cache->keys, cache->pending_rows, new_keys.value());
            cache->values = append_position(cache->values, cache->pending_rows, new_values.value());
            cache->pending_rows.clear();
        } else {
            cache->keys = new_keys.value();
            cache->values = new_values.value();
        }
    }
    return {Var(cache->keys), Var(cache->values)};
}

void MultiHeadAttention::cache_memory(const Var& memory, const ops::AttentionMask& mask, AttentionCache& cache) const {
    HNAS_CHECK(role_ == AttentionRole::decoder_cross, "attention: only decoder cross-attention caches the memory, not ",
               name_of(role_));
    cache.keys = k_proj_.forward(memory).value();
    cache.values = v_proj_ ? v_proj_->forward(memory).value() : memory.value();
    if (context_prior_) cache.preference = context_prior_->forward(memory, mask.key_valid).value();
    cache.from_memory = true;
}

Var MultiHeadAttention::attend(const Var& query, const Var& input_memory, const ops::AttentionMask& input_mask,
                               AttentionCache* cache, const Var& stack_prior, const TemplatePartners* partners,
                               ops::ResultReaders context_readers) const {
    HNAS_CHECK(query.rank() == 3 && input_memory.rank() == 3 && query.dim(2) == width_ && input_memory.dim(2) == width_,
               "attention: query ", shape_str(query.shape()), " and memory ", shape_str(input_memory.shape()),
               " must be (B, T, ", width_, ")");
    // G query rows a row of the memory: 1, or in decoding's cross-attention any whole number.
    const bool grouped = cache && role_ == AttentionRole::decoder_cross && query.dim(0) != input_memory.dim(0);
    HNAS_CHECK(query.dim(0) == input_memory.dim(0) ||
                   (grouped && input_memory.dim(0) > 0 && query.dim(0) % input_memory.dim(0) == 0),
               "attention: query ", shape_str(query.shape()), " and memory ", shape_str(input_memory.shape()),
               " must have the same batch, or in decoding's cross-attention a whole number of query rows a memory row");
    const int64_t group = grouped ? query.dim(0) / input_memory.dim(0) : 1;
    HNAS_CHECK(input_mask.causal == (role_ == AttentionRole::causal_self), "attention: a ",
               input_mask.causal ? "causal" : "non-causal", " mask given to ", name_of(role_));
    const bool with_partners = partners && compares_templates_;
    HNAS_CHECK(!with_partners || !cache, "attention: template partners in step-by-step decoding");
    const WithPartners extended = with_partners ? append_partner_templates(input_memory, input_mask, *partners)
                                                : WithPartners{input_memory, input_mask};
    const Var& memory = extended.memory;
    const ops::AttentionMask& mask = extended.mask;
    // Projections keep their heads side by side, (B, T, H·K); the head products read them in place, and
    // only they (ops::ResultReaders).
    const Var q = q_proj_.forward(query, ops::ResultReaders::products);  // (B, Tq, D)
    if (cache && role_ == AttentionRole::decoder_cross && !cache->keys.defined()) cache_memory(memory, mask, *cache);
    const auto [k, v] = keys_and_values(query, memory, cache);  // (B, Tk, D), or (B/G, Tk, D) grouped
    const int64_t input_templates = with_partners ? k.dim(1) / 2 : k.dim(1);
    Var prior = preference(input_memory, input_mask, q.dim(1), input_templates, cache, stack_prior);
    AttentionRecord* probed = AttentionProbe::slot_for(*this);
    const bool intervening = AttentionIntervention::change_for(*this) != nullptr;
    // Grouped, the products read each memory row once for its G query rows (no kind that compares
    // templates decodes: each leaks the future); what pairs with the queries row by row, the mask and a
    // context preference, is repeated.
    ops::AttentionMask row_mask = mask;
    if (grouped) {
        if (row_mask.key_valid.defined()) row_mask.key_valid = each_row_repeated(row_mask.key_valid, group);
        if (prior.defined() && prior.dim(0) > 1) prior = Var(each_row_repeated(prior.value(), group));
    }
    // Without a prior, probe, intervention or decoding cache (training, evaluation): the scores, the
    // kind's normalization, dropout and the product with V one block of rows at a time, in cache.
    if (!compares_templates_ && !prior.defined() && !probed && !cache && !intervening) {
        if (const std::optional<ops::SliceNormalizer> normalizer = norm_.slice_normalizer()) {
            return ops::blocked_attention(q, k, v, heads_, alpha_ * score_scale_, row_mask, *normalizer,
                                          attention_dropout_.active_probability(), attention_dropout_.rng(), context_readers);
        }
    }
    Var scores = ops::head_scores(q, k, heads_, alpha_ * score_scale_);  // (B, H, Tq, Tk), Tk doubled with partners
    // log u at every (query, input template), (B, H, Tq, Tk): the preference a kind that compares
    // templates takes, and what the dual analysis reads; undefined without priors
    const Var log_preference = prior.defined() && (compares_templates_ || probed)
                                   ? ops::add(prior, Var(Tensor::zeros({scores.dim(0), heads_, scores.dim(2), input_templates})))
                                   : Var();
    Var weights;
    if (compares_templates_) {
        // paper 003 §9: the templates are the keys, compared with the input's (the first Tk) at the
        // scores' scale (without α); the prior is the preference u over the input's
        const Var inputs = k.dim(1) == input_templates ? k : ops::slice(k, 1, 0, input_templates);
        const Var similarity = ops::head_scores(k, inputs, heads_, score_scale_);  // (B, H, A, Tk)
        weights = norm_.normalize({scores, similarity, log_preference}, row_mask);
    } else {
        if (prior.defined()) scores = ops::add(scores, prior);
        const Var normalized =
            cache ? norm_.normalize_step(scores, row_mask, cache->norm_state) : norm_.normalize(scores, row_mask);
        weights = intervened(*this, normalized, scores, row_mask);
    }
    if (probed) {
        // Padded queries and masked entries hold exactly zero weight, so a plain sum over queries is
        // the sum over real queries.
        NoGradScope no_grad;
        *probed = {.key_weight_sums = ops::sum(Var(weights.value()), 2).value(),  // (B, H, Tk)
                   .key_valid = row_mask.key_valid,
                   .query = query.value(),
                   .memory = grouped ? each_row_repeated(input_memory.value(), group) : input_memory.value(),
                   .log_preference = log_preference.defined() ? log_preference.value() : Tensor()};
    }
    weights = attention_dropout_.forward(weights, ops::ResultReaders::products);
    return ops::head_context(weights, v, context_readers);  // (B, Tq, D)
}

}  // namespace hnas::nn
