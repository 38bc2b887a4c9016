#include "train/block_demo.h"

#include "nn/transformer_layer.h"
#include "optim/optimizer.h"

namespace hnas::train {

namespace {

constexpr int64_t kBatch = 8, kLength = 10, kVocabulary = 16, kWidth = 32, kPad = 0;

nn::TransformerLayerOptions layer_options() {
    nn::TransformerLayerOptions options;
    options.self_attention.width = kWidth;
    options.self_attention.heads = 4;
    options.hidden = 4 * kWidth;
    return options;
}

class ReverserModel : public nn::Module {
public:
    ReverserModel(Rng& init_rng, Rng& dropout_rng)
        : tokens_(register_module("tokens", std::make_unique<nn::Embedding>(kVocabulary, kWidth, 0.5f, init_rng))),
          positions_(register_module("positions", std::make_unique<nn::Embedding>(kLength, kWidth, 0.5f, init_rng))),
          layer_(register_module("layer", std::make_unique<nn::TransformerLayer>(
                                              layer_options(), init_rng, dropout_rng))),
          output_(register_module("output", std::make_unique<nn::Linear>(kWidth, kVocabulary, init_rng))) {}

    // ids (B, T) -> logits (B·T, V)
    Var forward(const Tensor& ids, const ops::AttentionMask& mask) const {
        std::vector<int32_t> position_ids;
        for (int64_t b = 0; b < kBatch; ++b)
            for (int64_t t = 0; t < kLength; ++t) position_ids.push_back(static_cast<int32_t>(t));
        Var x = ops::add(tokens_.forward(ids), positions_.forward(Tensor::from_ints({kBatch, kLength}, position_ids)));
        Var hidden = layer_.forward(x, mask);  // (B, T, D)
        return ops::reshape(output_.forward(hidden), {kBatch * kLength, kVocabulary});
    }

private:
    nn::Embedding& tokens_;
    nn::Embedding& positions_;
    nn::TransformerLayer& layer_;
    nn::Linear& output_;
};

}  // namespace

std::vector<float> run_block_demo(const BlockDemoOptions& options, const std::function<void(int, float)>& on_step) {
    Rng data_rng(options.seed, 1), init_rng(options.seed, 2), dropout_rng(options.seed, 3);
    // Sequences of random tokens 1..V-1 with random real lengths; targets are the reversed real part.
    std::vector<int32_t> ids(kBatch * kLength, kPad), targets(kBatch * kLength, kPad);
    std::vector<float> valid(kBatch * kLength, 0.0f);
    for (int64_t b = 0; b < kBatch; ++b) {
        const int64_t length = kLength / 2 + static_cast<int64_t>(data_rng.below(kLength / 2 + 1));
        for (int64_t t = 0; t < length; ++t) {
            ids[b * kLength + t] = 1 + static_cast<int32_t>(data_rng.below(kVocabulary - 1));
            valid[b * kLength + t] = 1.0f;
        }
        for (int64_t t = 0; t < length; ++t) targets[b * kLength + t] = ids[b * kLength + length - 1 - t];
    }
    const Tensor id_tensor = Tensor::from_ints({kBatch, kLength}, ids);
    const Tensor target_tensor = Tensor::from_ints({kBatch * kLength}, targets);
    const Tensor valid_tensor = Tensor::from_floats({kBatch, kLength}, valid);
    const ops::AttentionMask mask{valid_tensor, valid_tensor};

    ReverserModel model(init_rng, dropout_rng);
    const auto parameters = model.named_parameters();
    optim::Optimizer adam(parameters, {optim::OptimizerKind::adam});
    std::vector<float> losses;
    for (int step = 0; step < options.steps; ++step) {
        adam.zero_grad();
        Var loss = ops::cross_entropy(model.forward(id_tensor, mask), target_tensor, kPad);
        losses.push_back(loss.item());
        if (on_step) on_step(step, loss.item());
        loss.backward();
        adam.step(options.learning_rate);
    }
    return losses;
}

}  // namespace hnas::train
