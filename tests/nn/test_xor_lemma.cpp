// Paper 002 App. A: Lemma 1 (no convex combination of two binary inputs is their XOR) and Lemma 2 (a
// standardized weighting of affine scores is). One query over two keys whose values are x1 and x2: a kind
// whose weights are a distribution over the keys (lnas, dnas, hnas, sinkhorn, ...) outputs w1 + w2 = 1 at
// x = (1, 1), whatever its scores, where XOR is 0; nap, with the scores (x1, x2), outputs XOR up to its ε.
#include "nn/attention_norm.h"
#include "test_support.h"

namespace hnas {
namespace {

// The weighted sum w1·x1 + w2·x2 of the kind's weights for one query over the scores `scores`.
double weighted_sum(const nn::AttentionNorm& norm, const std::vector<float>& scores, double x1, double x2) {
    NoGradScope no_grad;
    const Tensor w = norm.normalize(Var(Tensor::from_floats({1, 1, 1, 2}, scores)), {}).value();
    return w.data()[0] * x1 + w.data()[1] * x2;
}

TEST(XorLemma, NoDistributionOverTheKeysIsXor) {
    Rng rng(5);
    int checked = 0;
    for (const nn::AttentionKind* kind : nn::attention_kinds()) {
        if (!kind->rows_sum_to_one || kind->compares_templates) continue;
        const auto norm = testing::make_attention_norm(kind->name, 1);
        for (int draw = 0; draw < 50; ++draw) {
            const std::vector<float> scores{rng.uniform(-4.0f, 4.0f), rng.uniform(-4.0f, 4.0f)};
            // XOR(1, 1) = 0, but a convex combination of 1 and 1 is 1 (Lemma 1's proof).
            EXPECT_NEAR(weighted_sum(*norm, scores, 1.0, 1.0), 1.0, 1e-6) << kind->name;
        }
        ++checked;
    }
    EXPECT_GE(checked, 5);
}

TEST(XorLemma, StandardizedWeightsOfTheInputsAreXor) {
    // Lemma 2 with f(x1, x2) = (x1, x2): standardized over two keys the weights are (1, −1) when x1 > x2,
    // (−1, 1) when x1 < x2 and 0 when equal, times σ/(σ + ε) with σ = |x1 − x2|/2.
    const auto nap = testing::make_attention_norm("nap", 1, {{"nap_denominator", "std_plus_eps"}, {"nap_eps", 1e-3}});
    const double shrink = 0.5 / (0.5 + 1e-3);
    for (const auto& [x1, x2, xor_value] : {std::tuple{0, 0, 0}, {0, 1, 1}, {1, 0, 1}, {1, 1, 0}}) {
        EXPECT_NEAR(weighted_sum(*nap, {static_cast<float>(x1), static_cast<float>(x2)}, x1, x2), xor_value * shrink, 1e-6)
            << x1 << " XOR " << x2;
    }
}

}  // namespace
}  // namespace hnas
