#include "models/seq2seq.h"

#include <algorithm>
#include <cmath>
#include <numeric>

namespace hnas::models {

Seq2SeqModel::Seq2SeqModel(const ModelConfig& config, Rng& init_rng, Rng& dropout_rng)
    : TokenModel(config),
      // Token embeddings ~ N(0, D^-1/2), so that after the sqrt(D) scale they have unit variance.
      tokens_(register_module("embedding", std::make_unique<nn::Embedding>(
                                               config.vocab_size, config.width,
                                               1.0f / std::sqrt(static_cast<float>(config.width)), init_rng))),
      source_embeddings_(register_module("encoder", std::make_unique<EmbeddingSum>(
                                                        config.width, embedding_options(config, config.max_source_positions),
                                                        init_rng, dropout_rng))),
      target_embeddings_(register_module("decoder", std::make_unique<EmbeddingSum>(
                                                        config.width, embedding_options(config, config.max_target_positions),
                                                        init_rng, dropout_rng))) {
    HNAS_CHECK(config.architecture == Architecture::seq2seq, "seq2seq model: the config describes another architecture");
    encoder_ = register_encoder_stack(init_rng, dropout_rng);
    for (size_t i = 0; i < static_cast<size_t>(config.decoder_layers); ++i) {
        const nn::TransformerLayer* weights_from = config.share_encoder_decoder ? encoder_.layers.at(i) : nullptr;
        decoder_layers_.push_back(&register_module(
            "decoder.layers." + std::to_string(i),
            std::make_unique<nn::TransformerLayer>(layer_options(config, config.decoder_attention,
                                                                 nn::AttentionRole::causal_self, i, &config.cross_attention),
                                                   init_rng, dropout_rng, weights_from)));
    }
    if (config.norm == nn::NormPlacement::pre) {
        decoder_final_norm_ = &register_module("decoder.final_norm", std::make_unique<nn::LayerNorm>(config.width, config.layer_norm_eps));
    }
    decoder_prior_ = register_stack_prior("decoder.relative_bias", config.decoder_attention);
    cross_prior_ = register_stack_prior("decoder.cross_relative_bias", config.cross_attention);
    if (!config.tie_embeddings) {
        output_ = &register_module("output", std::make_unique<nn::Linear>(config.width, config.vocab_size, init_rng, false));
    }
    apply_weight_init(init_rng);
}

Var Seq2SeqModel::encode(const Tensor& source_ids, const Tensor& source_valid) const {
    return encoder_.forward(source_embeddings_.forward(tokens_, source_ids), {source_valid, source_valid});  // (B, S, D)
}

Var Seq2SeqModel::run_decoder(Var y, const ops::AttentionMask& self_mask, const Var& memory,
                              const ops::AttentionMask& memory_mask, std::vector<nn::LayerCache>* caches) const {
    // The shared priors' biases, once for every layer: queries from query_offset on, over every key so far.
    nn::StackPriors priors;
    const int64_t queries = y.dim(1);
    if (decoder_prior_) priors.self = decoder_prior_->forward(queries, self_mask.query_offset + queries, self_mask.query_offset);
    if (cross_prior_) priors.cross = cross_prior_->forward(queries, memory.dim(1), memory_mask.query_offset);
    for (size_t i = 0; i < decoder_layers_.size(); ++i) {
        y = decoder_layers_[i]->forward(y, self_mask, memory, memory_mask, caches ? &(*caches)[i] : nullptr, priors);
    }
    return decoder_final_norm_ ? decoder_final_norm_->forward(y) : y;
}

Var Seq2SeqModel::decode(const Var& memory, const Tensor& source_valid, const Tensor& target_input,
                         const Tensor& target_valid) const {
    Var y = target_embeddings_.forward(tokens_, target_input);  // (B, T, D)
    const ops::AttentionMask self_mask{target_valid, target_valid, true};
    const ops::AttentionMask memory_mask{source_valid, target_valid};
    return run_decoder(y, self_mask, memory, memory_mask, nullptr);
}

namespace {
// G when `sources` is runs of G equal sources each (beam search's beams), else 1.
size_t uniform_run_length(const std::vector<int64_t>& sources) {
    size_t run = 1;
    while (run < sources.size() && sources[run] == sources[0]) ++run;
    if (sources.size() % run != 0) return 1;
    for (size_t i = 0; i < sources.size(); ++i)
        if (sources[i] != sources[i - i % run]) return 1;
    return run;
}
}  // namespace

void DecoderState::keep_rows(const std::vector<int64_t>& rows) {
    std::vector<int64_t> sources(rows.size());
    for (size_t i = 0; i < rows.size(); ++i) {
        HNAS_CHECK(rows[i] >= 0 && rows[i] < static_cast<int64_t>(row_sources.size()), "decoder state: row ", rows[i],
                   " of ", row_sources.size(), " rows");
        sources[i] = row_sources[static_cast<size_t>(rows[i])];
    }
    const size_t group = uniform_run_length(sources);
    std::vector<int64_t> kept_memory_sources;
    for (size_t i = 0; i < sources.size(); i += group) kept_memory_sources.push_back(sources[i]);
    std::vector<int64_t> memory_rows;  // of the memory now, for each memory row kept
    const bool memory_changes = kept_memory_sources != memory_sources;
    if (memory_changes) {
        for (int64_t source : kept_memory_sources) {
            const auto found = std::find(memory_sources.begin(), memory_sources.end(), source);
            memory_rows.push_back(found - memory_sources.begin());  // every row's source has a memory row
        }
        memory = Var(memory.value().take_rows(memory_rows));
        source_valid = source_valid.take_rows(memory_rows);
    }
    for (auto& layer : layers) layer.keep_rows(rows, memory_changes ? &memory_rows : nullptr);
    row_sources = std::move(sources);
    memory_sources = std::move(kept_memory_sources);
}

DecoderState Seq2SeqModel::start_decoding(const Tensor& source_ids, const Tensor& source_valid) const {
    DecoderState state;
    state.memory = encode(source_ids, source_valid);
    state.source_valid = source_valid;
    state.layers.resize(decoder_layers_.size());
    state.row_sources.resize(static_cast<size_t>(source_ids.dim(0)));
    std::iota(state.row_sources.begin(), state.row_sources.end(), 0);
    state.memory_sources = state.row_sources;
    // The memory's keys and values, one row a source, which its beams read (keep_rows) instead of
    // projecting every beam's copy of the memory.
    const ops::AttentionMask memory_mask{source_valid, Tensor()};
    for (size_t i = 0; i < decoder_layers_.size(); ++i) {
        decoder_layers_[i]->cross_attention()->cache_memory(state.memory, memory_mask, state.layers[i].cross);
    }
    return state;
}

Tensor Seq2SeqModel::decode_step(DecoderState& state, const Tensor& tokens) const {
    const auto rows = static_cast<int64_t>(state.row_sources.size());
    HNAS_CHECK(tokens.rank() == 1 && tokens.dim(0) == rows, "decode step: tokens ", shape_str(tokens.shape()),
               " must be one per row of the decoder state's ", rows);
    Var y = target_embeddings_.forward(tokens_, tokens.reshape({rows, 1}), Tensor(), state.position);  // (N, 1, D)
    // The new position sees every cached one (causal, offset by its position); no padding while decoding.
    const ops::AttentionMask self_mask{Tensor(), Tensor(), true, state.position};
    const ops::AttentionMask memory_mask{state.source_valid, Tensor(), false, state.position};
    const Var states = run_decoder(y, self_mask, state.memory, memory_mask, &state.layers);
    ++state.position;
    return logits(states).value();  // (N, V)
}

Var Seq2SeqModel::logits(const Var& states) const {
    Var flat = ops::reshape(states, {-1, config_.width});                          // (B·T, D)
    return output_ ? output_->forward(flat) : ops::linear(flat, tokens_.weight(), Var());  // (B·T, V)
}

Var Seq2SeqModel::loss(const Tensor& source_ids, const Tensor& source_valid, const Tensor& target_input,
                       const Tensor& target_output, const Tensor& target_valid, float label_smoothing) const {
    Var memory = encode(source_ids, source_valid);
    Var states = decode(memory, source_valid, target_input, target_valid);
    return ops::cross_entropy(logits(states), target_output.reshape({-1}), kPadId, label_smoothing);
}

}  // namespace hnas::models
