// Test-time interventions on attention weights (analysis/attention_interventions.h): each change on
// hand-computed weights, padding left alone, the scope's reach in a model, and `hnas test --intervention`.
#include <filesystem>

#include "analysis/attention_interventions.h"
#include "base/read_file.h"
#include "nn/attention.h"
#include "same_tensor.h"
#include "test_support.h"

namespace hnas {
namespace {

namespace fs = std::filesystem;
using analysis::Intervention;

Tensor change(Intervention intervention, const Tensor& weights, const ops::AttentionMask& mask = {}, double epsilon = 1e-3) {
    return analysis::intervention_change(intervention, epsilon)(weights, Tensor::zeros(weights.shape()), mask);
}

void expect_values(const Tensor& t, const std::vector<double>& expected) {
    ASSERT_EQ(t.numel(), static_cast<int64_t>(expected.size()));
    for (size_t e = 0; e < expected.size(); ++e) EXPECT_NEAR(t.data()[e], expected[e], 1e-6) << "entry " << e;
}

// Three queries over three keys: key 2's weight sum is 0.0006 + 0.0003 + 0.0001 = 0.001, key 1's 0.899.
const Tensor kWeights = Tensor::from_floats({1, 1, 3, 3}, {0.7f, 0.2994f, 0.0006f,  //
                                                           0.5f, 0.4997f, 0.0003f,  //
                                                           0.9f, 0.0999f, 0.0001f});

TEST(Interventions, DropGivesExplainedAwayKeysNoWeightAndRenormalizesEachQuery) {
    const Tensor dropped = change(Intervention::drop_explained_away, kWeights, {}, 1.1e-3);
    expect_values(dropped, {0.7 / 0.9994, 0.2994 / 0.9994, 0.0, 0.5 / 0.9997, 0.4997 / 0.9997, 0.0, 0.9 / 0.9999, 0.0999 / 0.9999, 0.0});
    // At ε 9·10⁻⁴ no key's sum is below it: nothing changes.
    expect_values(change(Intervention::drop_explained_away, kWeights, {}, 9e-4), {0.7, 0.2994, 0.0006, 0.5, 0.4997, 0.0003, 0.9, 0.0999, 0.0001});
}

TEST(Interventions, FloorRaisesEveryKeySumBelowOneOverLAndRenormalizes) {
    // Key 2's sum 0.001 is below 1/3: each of the 3 queries gets (1/3 − 0.001)/3 more on it; keys 0 and 1
    // (sums 2.1 and 0.899) keep theirs; each row then sums to 1 + 0.110… and is divided by it.
    const double added = (1.0 / 3.0 - 0.001) / 3.0;
    const Tensor floored = change(Intervention::floor_key_sums, kWeights);
    const double rows[3][3] = {{0.7, 0.2994, 0.0006}, {0.5, 0.4997, 0.0003}, {0.9, 0.0999, 0.0001}};
    std::vector<double> expected;
    for (const auto& row : rows) {
        for (int j = 0; j < 3; ++j) expected.push_back((row[j] + (j == 2 ? added : 0.0)) / (1.0 + added));
    }
    expect_values(floored, expected);
}

TEST(Interventions, PaddedQueriesAndKeysAreLeftAlone) {
    // Query 2 and key 2 are padding (zero weight): they take no share of the floor and count in no sum.
    const Tensor weights = Tensor::from_floats({1, 1, 3, 3}, {0.9995f, 0.0005f, 0.0f, 0.6f, 0.4f, 0.0f, 0.0f, 0.0f, 0.0f});
    const Tensor valid = Tensor::from_floats({1, 3}, {1.0f, 1.0f, 0.0f});
    const ops::AttentionMask mask{valid, valid};
    // Of the 2 real keys, key 1's sum 0.4005 is below 1/2: the 2 real queries share the 0.0995 it lacks.
    // No sum is below ε 10⁻³, so dropping changes nothing.
    const double added = (0.5 - 0.4005) / 2.0;
    expect_values(change(Intervention::floor_key_sums, weights, mask),
                  {0.9995 / (1.0 + added), (0.0005 + added) / (1.0 + added), 0.0, 0.6 / (1.0 + added), (0.4 + added) / (1.0 + added), 0.0,
                   0.0, 0.0, 0.0});
    expect_values(change(Intervention::drop_explained_away, weights, mask), {0.9995, 0.0005, 0.0, 0.6, 0.4, 0.0, 0.0, 0.0, 0.0});
}

TEST(Interventions, DnasWeightsAreDnasOfTheScores) {
    const Tensor scores = testing::random_tensor({2, 2, 4, 4}, 5, -3.0f, 3.0f);
    const Tensor valid = Tensor::from_floats({2, 4}, {1, 1, 1, 1, 1, 1, 1, 0});
    const ops::AttentionMask mask{valid, valid};
    NoGradScope no_grad;
    const Tensor softmax = ops::normalize_attention(Var(scores), mask, {ops::NormalizeAxis::keys}).value();
    const Tensor dnas = ops::normalize_attention(Var(scores), mask, {ops::NormalizeAxis::queries, ops::NormalizeAxis::keys}).value();
    EXPECT_TRUE(testing::same_tensor(analysis::intervention_change(Intervention::dnas_weights)(softmax, scores, mask), dnas));
}

TEST(Interventions, BadArgumentsAreNamed) {
    EXPECT_CONTAINS(testing::error_of([] { analysis::intervention_change(Intervention::drop_explained_away, 0.0); }),
                    "intervention: ε 0 must be positive");
    EXPECT_CONTAINS(testing::error_of([] { change(Intervention::floor_key_sums, Tensor::zeros({3, 3})); }),
                    "intervention: weights (3, 3) and scores (3, 3) must be the same (B, H, Lq, Lk)");
    EXPECT_CONTAINS(testing::error_of([] { change(Intervention::floor_key_sums, kWeights, {Tensor::full({1, 2}, 1.0f), {}}); }),
                    "intervention: key mask (1, 2) for weights (1, 1, 3, 3)");
}

// In a model: an open intervention changes a bidirectional attention's output and no causal one's; the
// innermost of two applies; a pass with gradients on is refused.
TEST(Interventions, ScopeReachesBidirectionalAttentionsOnly) {
    nn::AttentionOptions options;
    options.width = 8;
    options.heads = 2;
    Rng init(3), dropout(4);
    const nn::MultiHeadAttention encoder(options, init, dropout);
    options.role = nn::AttentionRole::causal_self;
    const nn::MultiHeadAttention decoder(options, init, dropout);
    const Var x(testing::random_tensor({2, 5, 8}, 9, -2.0f, 2.0f));
    const ops::AttentionMask causal{{}, {}, true};
    const auto forward = [](const nn::MultiHeadAttention& attention, const Var& input, const ops::AttentionMask& mask) {
        NoGradScope no_grad;
        return attention.forward(input, input, mask).value();
    };
    const Tensor plain = forward(encoder, x, {}), plain_causal = forward(decoder, x, causal);
    {
        const nn::AttentionIntervention outer(analysis::intervention_change(Intervention::floor_key_sums));
        const Tensor floored = forward(encoder, x, {});
        EXPECT_FALSE(testing::same_tensor(floored, plain));
        {
            const nn::AttentionIntervention inner(analysis::intervention_change(Intervention::dnas_weights));
            const Tensor swapped = forward(encoder, x, {});
            EXPECT_FALSE(testing::same_tensor(swapped, floored));
            EXPECT_FALSE(testing::same_tensor(swapped, plain));
        }
        EXPECT_TRUE(testing::same_tensor(forward(encoder, x, {}), floored));
        EXPECT_TRUE(testing::same_tensor(forward(decoder, x, causal), plain_causal));
        EXPECT_CONTAINS(testing::error_of([&] { encoder.forward(x, x, {}); }),
                        "attention: an intervention changes the weights of evaluation only (NoGradScope)");
    }
    EXPECT_TRUE(testing::same_tensor(forward(encoder, x, {}), plain));
}

TEST(Interventions, TestCommandWritesTheInterventionsResultBesideTheRun) {
    const testing::ScratchDir scratch{testing::name_for_this_test("hnas_interventions_")};
    const Json config = {{"task", "synthetic"},
                         {"seed", 7},
                         {"model", {{"d_model", 16}, {"heads", 2}, {"ffn_dim", 32}, {"encoder_layers", 1}, {"norm", "mte"}}},
                         {"data", {{"problem", "case_distinction"}, {"length", 16}, {"valid_length", 8}, {"batch_sentences", 16}}},
                         {"train", {{"learning_rate", 1e-2}, {"steps", 40}, {"log_every", 10}}},
                         {"validation", {{"every", 0}}},
                         {"checkpoint", {{"every", 40}}},
                         {"test", {{"batches", 4}}}};
    const std::string run = scratch.path("run");
    const testing::Outcome trained = testing::run_hnas({"train", "--config", scratch.write("config.json", config.dump()), "--out", run}, scratch);
    ASSERT_EQ(trained.exit_code(), 0) << trained.output;
    ASSERT_EQ(testing::run_hnas({"test", run}, scratch).exit_code(), 0);
    const std::string own = read_file(run + "/result.json", "result");
    const std::string out = scratch.path("dnas/seed-7");
    const testing::Outcome tested = testing::run_hnas({"test", run, "--intervention", "dnas_weights", "--out", out}, scratch);
    ASSERT_EQ(tested.exit_code(), 0) << tested.output;
    EXPECT_EQ(read_file(run + "/result.json", "result"), own);
    const Json before = parse_json(own, "result"), after = parse_json(read_file(out + "/result.json", "result"), "result");
    EXPECT_EQ(after.at("intervention"), (Json{{"name", "dnas_weights"}, {"epsilon", 1e-3}}));
    EXPECT_FALSE(before.contains("intervention"));
    EXPECT_EQ(after.at("per_example").at("accuracy").size(), before.at("per_example").at("accuracy").size());
    EXPECT_NE(after.at("metrics").at("loss"), before.at("metrics").at("loss"));
    const testing::Outcome missing = testing::run_hnas({"test", run, "--intervention", "dnas_weights"}, scratch);
    EXPECT_NE(missing.exit_code(), 0);
    EXPECT_CONTAINS(missing.output, "--intervention requires --out");
    const testing::Outcome unknown = testing::run_hnas({"test", run, "--intervention", "prune", "--out", out}, scratch);
    EXPECT_CONTAINS(unknown.output, "must be \"drop_explained_away\", \"floor_key_sums\" or \"dnas_weights\", got \"prune\"");
}

}  // namespace
}  // namespace hnas
