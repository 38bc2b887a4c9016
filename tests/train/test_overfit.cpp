// Whole-network smoke tests: a small MLP and a Transformer block each overfit a fixed batch, the
// loss falling by more than 90 % within 200 Adam steps.
#include "nn/layers.h"
#include "optim/optimizer.h"
#include "train/block_demo.h"
#include "test_support.h"

namespace hnas {
namespace {

TEST(Overfit, MlpFitsAFixedBatch) {
    Rng rng(5);
    nn::Linear hidden(6, 32, rng), output(32, 3, rng);
    const Tensor inputs = normal_tensor(rng, {16, 6});
    std::vector<int32_t> labels;
    for (int i = 0; i < 16; ++i) labels.push_back(static_cast<int32_t>(rng.below(3)));
    const Tensor targets = Tensor::from_ints({16}, labels);
    std::vector<nn::NamedParameter> parameters = hidden.named_parameters();
    for (const auto& p : output.named_parameters()) parameters.push_back(p);
    optim::Optimizer adam(parameters, {optim::OptimizerKind::adam});
    float first = 0.0f, last = 0.0f;
    for (int step = 0; step < 200; ++step) {
        adam.zero_grad();
        Var loss = ops::cross_entropy(output.forward(ops::relu(hidden.forward(Var(inputs)))), targets);
        if (step == 0) first = loss.item();
        last = loss.item();
        loss.backward();
        adam.step(1e-2f);
    }
    EXPECT_LT(last, 0.1f * first) << "first loss " << first << ", last " << last;
}

TEST(Overfit, TransformerBlockFitsAFixedBatch) {
    const std::vector<float> losses = train::run_block_demo({200, 1, 3e-3f});
    ASSERT_EQ(losses.size(), 200u);
    EXPECT_LT(losses.back(), 0.1f * losses.front()) << "first loss " << losses.front() << ", last " << losses.back();
}

}  // namespace
}  // namespace hnas
