// A test-time change of attention weights, for an analysis that asks whether a trained model needs what
// its weights gave (docs/analyses.md, "Interventions"): while an intervention is open on this thread,
// every bidirectional attention whose kind weighs its own keys (not one that compares templates)
// passes its weights through the change before dropout and the product with the values. Evaluation
// only: a change is a constant to the graph, so a pass with gradients on is refused.
#pragma once

#include <functional>

#include "ops/ops.h"

namespace hnas::nn {

class MultiHeadAttention;

class AttentionIntervention {
public:
    // weights (B, H, Lq, Lk) and the scores they came from (priors added), with their mask -> the new
    // weights, of the same shape, exactly 0 where the mask disallows.
    using Change = std::function<Tensor(const Tensor& weights, const Tensor& scores, const ops::AttentionMask& mask)>;

    // Opens the intervention on this thread; interventions nest, the innermost one applies.
    explicit AttentionIntervention(Change change);
    ~AttentionIntervention();
    AttentionIntervention(const AttentionIntervention&) = delete;
    AttentionIntervention& operator=(const AttentionIntervention&) = delete;

    // For MultiHeadAttention: the open intervention's change when it applies to `attention`, else null.
    static const Change* change_for(const MultiHeadAttention& attention);

private:
    Change change_;
    AttentionIntervention* enclosing_;
};

}  // namespace hnas::nn
