// The smallest end-to-end training run: token and position embeddings, one post-LN encoder layer and
// an output projection learn to reverse a fixed, padded batch of sequences with Adam. It exercises
// every op of a Transformer block, forward and backward; `hnas demo` runs it and a test requires the
// loss to fall by more than 90 %.
#pragma once

#include <cstdint>
#include <functional>
#include <vector>

namespace hnas::train {

struct BlockDemoOptions {
    int steps = 200;
    uint64_t seed = 1;
    float learning_rate = 3e-3f;
};

// Returns the loss before each step; calls on_step(step, loss) as it goes when given.
std::vector<float> run_block_demo(const BlockDemoOptions& options,
                                  const std::function<void(int, float)>& on_step = nullptr);

}  // namespace hnas::train
