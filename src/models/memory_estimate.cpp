#include "models/memory_estimate.h"

#include <algorithm>

namespace hnas::models {

namespace {

constexpr int64_t kFloatBytes = 4;
constexpr int64_t kParameterCopies = 4;  // value, gradient, first and second moment

int64_t linear(int64_t in, int64_t out, bool bias = true) { return in * out + (bias ? out : 0); }
int64_t layer_norm(int64_t width) { return 2 * width; }

int64_t prior_parameters(const ModelConfig& c, const AttentionStackConfig& stack) {
    return stack.prior ? stack.prior->buckets * c.heads : 0;
}

// Paper 003 §7's context preference: its tanh layer over the key and the summary, one weight vector per head.
int64_t context_prior_parameters(const ModelConfig& c, const AttentionStackConfig& stack) {
    if (!stack.context_prior) return 0;
    const int64_t hidden = stack.context_prior->hidden;
    return linear(c.width, hidden) + linear(c.width, hidden, false) + c.heads * hidden;
}

int64_t attention_parameters(const ModelConfig& c, const AttentionStackConfig& stack) {
    return 4 * linear(c.width, c.width) + (stack.share_prior ? 0 : prior_parameters(c, stack)) + context_prior_parameters(c, stack);
}

// The priors shared by the layers of a stack (T5): one table each.
int64_t shared_prior_parameters(const ModelConfig& c, const AttentionStackConfig& stack) {
    return stack.share_prior ? prior_parameters(c, stack) : 0;
}

// A layer: its mixer (attention, or pooling without parameters), cross-attention, their norms and the
// feed-forward block; an MTE layer (paper 002) adds norms on the attention heads and the hidden layer.
int64_t layer_parameters(const ModelConfig& c, const AttentionStackConfig& self, const AttentionStackConfig* cross) {
    const bool mte = c.norm == nn::NormPlacement::mte;
    int64_t count = layer_norm(c.width);
    if (cross || c.mixer == nn::Mixer::attention) {
        count += attention_parameters(c, self) + (mte && c.mte_attention_norm ? layer_norm(c.width) : 0);
    }
    if (cross) count += attention_parameters(c, *cross) + layer_norm(c.width);
    count += linear(c.width, c.ffn_width) + linear(c.ffn_width, c.width) + layer_norm(c.width);
    return count + (mte ? layer_norm(c.ffn_width) : 0);
}

// The encoder's layers and the prior they share, if they attend.
int64_t encoder_parameters(const ModelConfig& c) {
    const int64_t shared = c.mixer == nn::Mixer::attention ? shared_prior_parameters(c, c.encoder_attention) : 0;
    return c.encoder_layers * layer_parameters(c, c.encoder_attention, nullptr) + shared;
}

// A decoder layer: its own, or (share_encoder_decoder) only what it does not take from its encoder
// layer: the cross-attention's norm and each attention's own prior.
int64_t decoder_layer_parameters(const ModelConfig& c) {
    if (!c.share_encoder_decoder) return layer_parameters(c, c.decoder_attention, &c.cross_attention);
    const auto own_prior = [&](const AttentionStackConfig& stack) { return stack.share_prior ? 0 : prior_parameters(c, stack); };
    return own_prior(c.decoder_attention) + own_prior(c.cross_attention) + layer_norm(c.width);
}

int64_t embedding_parameters(const ModelConfig& c, int64_t positions, int64_t segments, bool norm) {
    const int64_t learned = c.positions == PositionEncoding::learned ? positions * c.width : 0;
    return learned + segments * c.width + (norm ? layer_norm(c.width) : 0);
}

int64_t parameter_count(const ModelConfig& c) {
    if (c.architecture == Architecture::multiview) {  // two fusion attentions without value projections, the readout
        const AttentionStackConfig& fusion_stack = c.encoder_attention;
        const int64_t per_view = 2 * linear(c.width, c.width) + prior_parameters(c, fusion_stack) +
                                 context_prior_parameters(c, fusion_stack);
        const int64_t fusion = c.mixer == nn::Mixer::attention ? 2 * per_view : 0;
        return fusion + layer_norm(c.width) + linear(c.width, c.ffn_width) + linear(c.ffn_width, c.ffn_width) +
               linear(c.ffn_width, c.multiview_classes);
    }
    if (c.architecture == Architecture::vit) {  // patch embedding, class token, positions, encoder, classifier
        return linear(c.image.patch_values, c.width) + c.width + (c.image.patches + 1) * c.width + encoder_parameters(c) +
               linear(c.width, c.image.classes) + (c.norm == nn::NormPlacement::pre ? layer_norm(c.width) : 0);
    }
    int64_t count = c.vocab_size * c.width;  // the token embedding
    if (c.architecture == Architecture::symbols) {
        count += embedding_parameters(c, c.max_source_positions, 0, c.embedding_norm);
        count += encoder_parameters(c);
        count += linear(c.width, c.symbol_output.per_position ? 1 : c.symbol_output.classes);
        if (c.norm == nn::NormPlacement::pre) count += layer_norm(c.width);
        return count;
    }
    if (c.architecture == Architecture::bert) {
        count += embedding_parameters(c, c.max_source_positions, c.segments, /*norm=*/true);
        count += encoder_parameters(c);
        const BertHeads& heads = c.bert_heads;
        if (heads.masked_lm) count += linear(c.width, c.width) + layer_norm(c.width) + c.vocab_size;
        count += linear(c.width, c.width);  // pooler
        if (heads.sentence_order) count += linear(c.width, 2);
        count += linear(c.width, heads.classes) + (heads.span ? linear(c.width, 2) : 0);
        if (c.norm == nn::NormPlacement::pre) count += layer_norm(c.width);
        return count;
    }
    count += embedding_parameters(c, c.max_source_positions, 0, c.embedding_norm) +
             embedding_parameters(c, c.max_target_positions, 0, c.embedding_norm);
    count += encoder_parameters(c);
    count += c.decoder_layers * decoder_layer_parameters(c);
    count += shared_prior_parameters(c, c.decoder_attention) + shared_prior_parameters(c, c.cross_attention);
    if (c.norm == nn::NormPlacement::pre) count += 2 * layer_norm(c.width);
    if (!c.tie_embeddings) count += linear(c.width, c.vocab_size, false);
    return count;
}

// Floats kept per query token by one attention sublayer over `keys` keys: the input, q, k, v and their
// head-split copies, the context before and after merging heads, the projection, the residual
// dropout mask and sum and the norm (13 widths); per head the scores, the normalized weights, the
// normalization's intermediates and the attention dropout's mask and output (6 per key).
int64_t attention_floats(const ModelConfig& c, int64_t keys) { return 13 * c.width + 6 * c.heads * keys; }

// The feed-forward block: input, hidden, activation and its dropout (3 hidden widths), output,
// residual sum and norm.
int64_t ffn_floats(const ModelConfig& c) { return 4 * c.width + 3 * c.ffn_width; }

}  // namespace

MemoryEstimate estimate_training_memory(const ModelConfig& config, const BatchShape& batch) {
    MemoryEstimate estimate;
    estimate.parameters = parameter_count(config);
    estimate.parameter_bytes = kParameterCopies * kFloatBytes * estimate.parameters;
    // In double: the sizes a config allows multiply past int64 here, and an estimate that wrapped would
    // pass the memory check. Above 2^50 bytes (1 PiB, beyond any machine) the estimate saturates.
    const auto d = [](int64_t value) { return static_cast<double>(value); };
    const double sources = d(batch.rows) * d(batch.source_length), targets = d(batch.rows) * d(batch.target_length);
    double floats = 0.0;
    if (config.architecture == Architecture::multiview) {  // two attentions per primary box, the readout
        floats = sources * d(2 * attention_floats(config, batch.source_length) + ffn_floats(config));
    } else {
        floats = sources * d(config.encoder_layers) * d(attention_floats(config, batch.source_length) + ffn_floats(config));
        if (config.architecture == Architecture::seq2seq) {
            floats += targets * d(config.decoder_layers) *
                      d(attention_floats(config, batch.target_length) + attention_floats(config, batch.source_length) + ffn_floats(config));
        }
        // Embedding sums and their dropout; the logits, their softmax and its gradient.
        floats += 3 * (sources + targets) * d(config.width) + 3 * d(batch.predicted_tokens) * d(config.vocab_size);
    }
    constexpr double kMostBytes = 1125899906842624.0;  // 2^50
    estimate.activation_bytes = static_cast<int64_t>(std::min(d(kFloatBytes) * floats, kMostBytes));
    return estimate;
}

}  // namespace hnas::models
