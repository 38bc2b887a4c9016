// The encoder of paper 002's experiments (§4-5, Fig. 2): a sequence of symbols embedded (token
// embedding, learned or no positions, no embedding norm), L layers of the configured block and mixer
// (BERT's post-LN, or the MTE block; attention of any kind, or sum or max pooling), then one of two
// outputs:
//   every position   a linear map of each state to one logit: a distribution over the positions
//                    (case distinction with "output across all tokens", §5.1);
//   first position   a linear map of the first state to C logits (first-token case distinction, §5.2,
//                    C = the training length, cut to the sequence's length; mode finding, §5.3, C = S).
// Shapes: B batch, L length, D width, C classes.
#pragma once

#include "models/embeddings.h"
#include "models/model.h"

namespace hnas::models {

class SymbolEncoder : public TokenModel {
public:
    SymbolEncoder(const ModelConfig& config, Rng& init_rng, Rng& dropout_rng);

    Var encode_tokens(const Tensor& ids, const Tensor& valid) const override;  // (B, L) -> (B, L, D)
    std::vector<LayerStack> stacks() const override { return {{"encoder", encoder_.layers}}; }

    // ids (B, L) -> logits (B, L) over the positions, or (B, min(C, L)) or (B, C) over classes (see above).
    Var logits(const Tensor& ids) const;

private:
    nn::Embedding& tokens_;
    EmbeddingSum& embeddings_;
    EncoderStack encoder_;
    nn::Linear* output_;
};

}  // namespace hnas::models
