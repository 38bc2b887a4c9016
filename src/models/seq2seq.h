// The encoder-decoder Transformer for headline generation: shared source/target vocabulary with one
// token embedding, which is also the output projection when tied; an encoder stack of bidirectional
// self-attention; a decoder stack of causal self-attention and cross-attention; post-LN by default.
// With share_encoder_decoder, each decoder layer runs on its encoder layer's weights.
// Shapes: B batch, S source length, T target length, D width, V vocabulary.
#pragma once

#include "models/embeddings.h"
#include "models/model.h"
#include "nn/transformer_layer.h"

namespace hnas::models {

// Step-by-step decoding state: the encoder's memory and every decoder layer's cached keys, values
// and normalizer state. Rows are hypotheses (a batch row, or a beam of one); the memory has a row for
// every G consecutive rows (G = rows / memory rows: beam search's beams of one source, whose
// cross-attention reads the memory's keys and values once for the G of them).
struct DecoderState {
    Var memory;                          // (M, S, D)
    Tensor source_valid;                 // (M, S)
    std::vector<nn::LayerCache> layers;  // one per decoder layer
    int64_t position = 0;                // of the next token fed to decode_step
    std::vector<int64_t> row_sources;    // the source (row of start_decoding's batch) each row decodes
    std::vector<int64_t> memory_sources;  // the source of each memory row
    // Keeps the given rows, in that order (beam search's reordering; repeats allowed). The memory keeps
    // a row for each run of G rows of one source when the runs have one length G, else one a row; it is
    // copied only when its sources change, the rest only when rows move.
    void keep_rows(const std::vector<int64_t>& rows);
};

class Seq2SeqModel : public TokenModel {
public:
    // Dropout masks come from dropout_rng, which the caller keeps (its state goes into checkpoints).
    Seq2SeqModel(const ModelConfig& config, Rng& init_rng, Rng& dropout_rng);

    // source_ids (B, S), source_valid (B, S) -> memory (B, S, D)
    Var encode(const Tensor& source_ids, const Tensor& source_valid) const;
    // memory (B, S, D), target_input (B, T) -> decoder states (B, T, D)
    Var decode(const Var& memory, const Tensor& source_valid, const Tensor& target_input, const Tensor& target_valid) const;
    // Encodes the sources and starts step-by-step decoding at position 0.
    DecoderState start_decoding(const Tensor& source_ids, const Tensor& source_valid) const;
    // tokens (N) at state.position -> next-token logits (N, V); advances the position. Equal to the
    // last row of decode() over the whole prefix (each position sees only earlier ones).
    Tensor decode_step(DecoderState& state, const Tensor& tokens) const;
    // states (B, T, D) -> logits (B·T, V)
    Var logits(const Var& states) const;
    // Mean cross-entropy of the next tokens (target_output, pad 0 ignored) with label smoothing.
    Var loss(const Tensor& source_ids, const Tensor& source_valid, const Tensor& target_input,
             const Tensor& target_output, const Tensor& target_valid, float label_smoothing) const;

    Var encode_tokens(const Tensor& ids, const Tensor& valid) const override { return encode(ids, valid); }
    std::vector<LayerStack> stacks() const override {
        return {{"encoder", encoder_.layers}, {"decoder", decoder_layers_}};
    }
    std::vector<nn::TransformerLayer*> decoder_layers() const { return decoder_layers_; }

private:
    Var run_decoder(Var y, const ops::AttentionMask& self_mask, const Var& memory, const ops::AttentionMask& memory_mask,
                    std::vector<nn::LayerCache>* caches) const;

    nn::Embedding& tokens_;
    EmbeddingSum& source_embeddings_;
    EmbeddingSum& target_embeddings_;
    EncoderStack encoder_;
    std::vector<nn::TransformerLayer*> decoder_layers_;
    nn::LayerNorm* decoder_final_norm_ = nullptr;  // pre-LN only
    // The priors the decoder's layers share (T5), for self- and cross-attention; null without.
    nn::RelativePositionBias* decoder_prior_ = nullptr;
    nn::RelativePositionBias* cross_prior_ = nullptr;
    nn::Linear* output_ = nullptr;                 // untied output projection only
};

}  // namespace hnas::models
