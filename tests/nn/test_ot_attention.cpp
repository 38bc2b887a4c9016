// Paper 003's optimal-transport attention (§9, Eq. 25) as the op ot_attention: its fused kernel against
// Eq. 25 evaluated in double, against its composed definition (weights and every gradient), against
// finite differences; each real query's weights sum to 1 over the template set; a template absent from
// the input shares the weight of the input templates it resembles (the paper's group example); the
// op's boundary names bad shapes and refuses a causal mask. In MultiHeadAttention, §9's template sets
// beyond the input (another example's templates, TemplatePartners): a duplicate of the input changes
// nothing, a partner's real templates take weight and its padding none, gradients match finite
// differences, other kinds see only their own row.
#include <cmath>

#include "nn/attention.h"
#include "nn/attention_probe.h"
#include "ops/ops.h"
#include "test_support.h"

namespace hnas {
namespace {

using testing::random_tensor;

constexpr int64_t kBatch = 2, kHeads = 2, kQueries = 3, kInputs = 4, kTemplates = 7;  // A = 4 input + 3 extra

// Row 0: everything real. Row 1: input template 3 and extra template 5 are padding, and so is query 2.
ops::AttentionMask padded_mask() {
    return {Tensor::from_floats({kBatch, kTemplates}, {1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 0, 1, 0, 1}),
            Tensor::from_floats({kBatch, kQueries}, {1, 1, 1, 1, 1, 0})};
}

struct OtInputs {
    Tensor scores, similarity, log_preference;
};

OtInputs random_inputs(uint64_t seed, bool preference) {
    return {random_tensor({kBatch, kHeads, kQueries, kTemplates}, seed, -2.0f, 2.0f),
            random_tensor({kBatch, kHeads, kTemplates, kInputs}, seed + 1, -2.0f, 2.0f),
            preference ? random_tensor({kBatch, kHeads, kQueries, kInputs}, seed + 2, -1.5f, 1.5f) : Tensor()};
}

bool real(const Tensor& valid, int64_t b, int64_t n, int64_t length) { return !valid.defined() || valid.data()[b * length + n] > 0.5f; }

// Eq. 25 in double, loop by loop: P[i, t] = Σ_j u_j exp(S_it + G_tj) / Σ_t' exp(S_it' + G_t'j).
std::vector<double> eq25(const OtInputs& in, const ops::AttentionMask& mask) {
    std::vector<double> P(static_cast<size_t>(kBatch * kHeads * kQueries * kTemplates), 0.0);
    for (int64_t b = 0; b < kBatch; ++b)
        for (int64_t h = 0; h < kHeads; ++h)
            for (int64_t i = 0; i < kQueries; ++i) {
                if (!real(mask.query_valid, b, i, kQueries)) continue;
                const int64_t slice = b * kHeads + h;
                std::vector<double> u(kInputs, 0.0);
                double total = 0.0;
                for (int64_t j = 0; j < kInputs; ++j) {
                    if (!real(mask.key_valid, b, j, kTemplates)) continue;
                    const double logit = in.log_preference.defined()
                                             ? in.log_preference.data()[(slice * kQueries + i) * kInputs + j] : 0.0;
                    u[static_cast<size_t>(j)] = std::exp(logit);
                    total += u[static_cast<size_t>(j)];
                }
                for (int64_t j = 0; j < kInputs; ++j) {
                    if (u[static_cast<size_t>(j)] == 0.0) continue;
                    auto term = [&](int64_t t) {
                        return std::exp(static_cast<double>(in.scores.data()[(slice * kQueries + i) * kTemplates + t]) +
                                        in.similarity.data()[(slice * kTemplates + t) * kInputs + j]);
                    };
                    double Z = 0.0;
                    for (int64_t t = 0; t < kTemplates; ++t) Z += real(mask.key_valid, b, t, kTemplates) ? term(t) : 0.0;
                    for (int64_t t = 0; t < kTemplates; ++t) {
                        if (real(mask.key_valid, b, t, kTemplates)) {
                            P[static_cast<size_t>((slice * kQueries + i) * kTemplates + t)] += u[static_cast<size_t>(j)] / total * term(t) / Z;
                        }
                    }
                }
            }
    return P;
}

Var run_ot(const OtInputs& in, const ops::AttentionMask& mask, bool reference, std::vector<Var>* leaves = nullptr) {
    std::vector<Var> vars{Var(in.scores.clone(), true), Var(in.similarity.clone(), true)};
    if (in.log_preference.defined()) vars.emplace_back(in.log_preference.clone(), true);
    const Var preference = vars.size() > 2 ? vars[2] : Var();
    Var out = reference ? ops::ot_attention_reference(vars[0], vars[1], preference, mask)
                        : ops::ot_attention(vars[0], vars[1], preference, mask);
    if (leaves) *leaves = vars;
    return out;
}

TEST(OtAttention, MatchesEq25InDouble) {
    for (const bool preference : {false, true}) {
        for (const bool padded : {false, true}) {
            const ops::AttentionMask mask = padded ? padded_mask() : ops::AttentionMask{};
            const OtInputs in = random_inputs(11, preference);
            const Tensor fused = run_ot(in, mask, false).value();
            const std::vector<double> expected = eq25(in, mask);
            for (int64_t e = 0; e < fused.numel(); ++e) {
                ASSERT_NEAR(fused.data()[e], expected[static_cast<size_t>(e)], 2e-6)
                    << (preference ? "preference" : "uniform") << (padded ? ", padded" : "") << ", weight " << e;
            }
        }
    }
}

TEST(OtAttention, FusedKernelMatchesItsComposedDefinition) {
    for (const bool preference : {false, true}) {
        const ops::AttentionMask mask = padded_mask();
        const OtInputs in = random_inputs(21, preference);
        const Tensor upstream = random_tensor({kBatch, kHeads, kQueries, kTemplates}, 23);
        std::vector<Var> fused_leaves, reference_leaves;
        Var fused = run_ot(in, mask, false, &fused_leaves), reference = run_ot(in, mask, true, &reference_leaves);
        fused.backward(upstream);
        reference.backward(upstream);
        for (int64_t e = 0; e < fused.numel(); ++e) ASSERT_NEAR(fused.value().data()[e], reference.value().data()[e], 1e-6) << e;
        for (size_t leaf = 0; leaf < fused_leaves.size(); ++leaf) {
            const Tensor a = fused_leaves[leaf].grad(), b = reference_leaves[leaf].grad();
            for (int64_t e = 0; e < a.numel(); ++e) ASSERT_NEAR(a.data()[e], b.data()[e], 2e-5) << "input " << leaf << " element " << e;
        }
    }
}

TEST(OtAttention, MatchesFiniteDifferences) {
    const ops::AttentionMask mask = padded_mask();
    const OtInputs in = random_inputs(31, true);
    testing::check_gradients({in.scores, in.similarity, in.log_preference},
                             [&](const std::vector<Var>& x) { return ops::ot_attention(x[0], x[1], x[2], mask); }, {1e-2f, 2e-3},
                             "ot_attention");
    testing::check_gradients({in.scores, in.similarity},
                             [&](const std::vector<Var>& x) { return ops::ot_attention(x[0], x[1], Var(), mask); }, {1e-2f, 2e-3},
                             "ot_attention, uniform preference");
}

// Real queries spread weight 1 over the real templates (Σ_t P = Σ_j u_j = 1); padded queries and
// padded templates get exactly 0.
TEST(OtAttention, RealRowsSumToOneAndPaddingGetsZero) {
    const ops::AttentionMask mask = padded_mask();
    const Tensor P = run_ot(random_inputs(41, true), mask, false).value();
    for (int64_t b = 0; b < kBatch; ++b)
        for (int64_t h = 0; h < kHeads; ++h)
            for (int64_t i = 0; i < kQueries; ++i) {
                double total = 0.0;
                for (int64_t t = 0; t < kTemplates; ++t) {
                    const float p = P.data()[((b * kHeads + h) * kQueries + i) * kTemplates + t];
                    if (!real(mask.key_valid, b, t, kTemplates) || !real(mask.query_valid, b, i, kQueries)) {
                        EXPECT_EQ(p, 0.0f);
                    }
                    total += p;
                }
                EXPECT_NEAR(total, real(mask.query_valid, b, i, kQueries) ? 1.0 : 0.0, 1e-6) << b << " " << h << " " << i;
            }
}

// Paper 003 §9's extreme case: templates in groups, M = 0 within a group and ∞ across (here a cost of
// 10⁴), equal scores: every template of input template j's group, present in the input or not, gets
// u_j / |group|. Templates 0 and 1 are the input's; 2 and 3 are not: groups {0, 2, 3} and {1}.
TEST(OtAttention, TemplateAbsentFromTheInputSharesItsGroupsWeight) {
    const int64_t A = 4, N = 2;
    const std::vector<int> group{0, 1, 0, 0};
    Tensor similarity = Tensor::empty({1, 1, A, N});
    for (int64_t t = 0; t < A; ++t)
        for (int64_t j = 0; j < N; ++j) similarity.data()[t * N + j] = group[static_cast<size_t>(t)] == group[static_cast<size_t>(j)] ? 0.0f : -1e4f;
    const Tensor scores = Tensor::full({1, 1, 1, A}, 0.7f);
    const Tensor log_preference = Tensor::from_floats({1, 1, 1, N}, {std::log(0.6f), std::log(0.4f)});
    const Tensor P = ops::ot_attention(Var(scores), Var(similarity), Var(log_preference), {}).value();
    EXPECT_NEAR(P.data()[0], 0.2, 1e-6);
    EXPECT_NEAR(P.data()[1], 0.4, 1e-6);
    EXPECT_NEAR(P.data()[2], 0.2, 1e-6);  // absent from the input, sharing template 0's weight
    EXPECT_NEAR(P.data()[3], 0.2, 1e-6);
}

TEST(OtAttention, BadShapesAndCausalMasksAreErrorsNamingTheOp) {
    const OtInputs in = random_inputs(51, true);
    const Var S(in.scores), G(in.similarity), U(in.log_preference);
    EXPECT_CONTAINS(testing::error_of([&] { ops::ot_attention(S, Var(random_tensor({kBatch, kHeads, kTemplates + 1, kInputs}, 1)), U, {}); }),
                    "ot_attention: similarity (2, 2, 8, 4) must be (B, H, A, N) with 1 ≤ N ≤ A for scores (2, 2, 3, 7)");
    EXPECT_CONTAINS(testing::error_of([&] { ops::ot_attention(S, G, Var(random_tensor({kBatch, kHeads, kQueries, 3}, 1)), {}); }),
                    "ot_attention: log_preference (2, 2, 3, 3) must be (B, H, Lq, N) = (2, 2, 3, 4)");
    ops::AttentionMask causal;
    causal.causal = true;
    EXPECT_CONTAINS(testing::error_of([&] { ops::ot_attention(S, G, U, causal); }), "ot_attention: every query sees the whole template set");
    EXPECT_CONTAINS(testing::error_of([&] { ops::ot_attention(S, G, U, {Tensor::full({kBatch, 5}, 1.0f), Tensor()}); }),
                    "ot_attention: key_valid (2, 5) does not match scores (2, 2, 3, 7)");
}

// ---- extra template sets in MultiHeadAttention (paper 003 §9) -------------------------------------

constexpr int64_t kWidth = 8, kLength = 5;

std::unique_ptr<nn::MultiHeadAttention> attention_of(const std::string& kind) {
    nn::AttentionOptions options;
    options.width = kWidth;
    options.heads = kHeads;
    options.kind = kind;
    Rng init(61), dropout(62);
    return std::make_unique<nn::MultiHeadAttention>(options, init, dropout);
}

// Three rows; row 2 has two padded positions.
Tensor three_rows_valid() { return Tensor::from_floats({3, kLength}, {1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 0, 0}); }

// Eq. 25 with every template doubled: each copy takes half of Z_j's mass and carries the same value, so
// a row whose partner is its own copy computes exactly what it computes alone.
TEST(OtAttention, APartnerIdenticalToItsRowLeavesTheOutputUnchanged) {
    NoGradScope no_grad;
    const auto attention = attention_of("ot");
    Tensor x = random_tensor({3, kLength, kWidth}, 63);
    std::copy_n(x.data(), kLength * kWidth, x.data() + kLength * kWidth);  // row 1 = row 0
    const Tensor valid = Tensor::full({3, kLength}, 1.0f);
    const ops::AttentionMask mask{valid, valid};
    const Tensor alone = attention->forward(Var(x), Var(x), mask).value();
    const nn::TemplatePartners partners{{1, -1, 0}};
    const Tensor with = attention->forward(Var(x), Var(x), mask, nullptr, Var(), &partners).value();
    for (int64_t e = 0; e < 2 * kLength * kWidth; ++e) ASSERT_NEAR(with.data()[e], alone.data()[e], 1e-5) << e;
    double change = 0.0;  // row 2 saw row 0's templates
    for (int64_t e = 2 * kLength * kWidth; e < 3 * kLength * kWidth; ++e) change += std::abs(with.data()[e] - alone.data()[e]);
    EXPECT_GT(change, 1e-3);
}

// The key weight sums over the doubled template set: a partner's real templates take weight, its
// padding none, and the second half of a row without a partner none.
TEST(OtAttention, PartnersRealTemplatesTakeWeightAndItsPaddingNone) {
    NoGradScope no_grad;
    const auto attention = attention_of("ot");
    const nn::AttentionProbe probe({attention.get()});
    const Tensor x = random_tensor({3, kLength, kWidth}, 64);
    const Tensor valid = three_rows_valid();
    const nn::TemplatePartners partners{{2, -1, 0}};
    attention->forward(Var(x), Var(x), {valid, valid}, nullptr, Var(), &partners);
    const Tensor& sums = probe.record(*attention).key_weight_sums;  // (3, H, 2·L)
    ASSERT_EQ(sums.shape(), (Shape{3, kHeads, 2 * kLength}));
    for (int64_t h = 0; h < kHeads; ++h)
        for (int64_t t = 0; t < kLength; ++t) {
            const auto at = [&](int64_t row, int64_t key) { return sums.data()[(row * kHeads + h) * 2 * kLength + key]; };
            EXPECT_EQ(at(0, kLength + t) > 0.0f, t < 3) << "row 0 sees row 2's real templates " << t;
            EXPECT_EQ(at(1, kLength + t), 0.0f) << "row 1 has no partner";
            EXPECT_GT(at(2, kLength + t), 0.0f) << "row 2 sees row 0's templates";
            EXPECT_EQ(at(2, t) > 0.0f, t < 3) << "row 2's own padding";
        }
}

TEST(OtAttention, MultiHeadAttentionWithPartnersMatchesFiniteDifferences) {
    const auto attention = attention_of("ot");
    const Tensor x = random_tensor({3, kLength, kWidth}, 65);
    const Tensor valid = three_rows_valid();
    const ops::AttentionMask mask{valid, valid};
    const nn::TemplatePartners partners{{2, 0, -1}};
    testing::check_parameter_gradients(*attention, [&] { return attention->forward(Var(x), Var(x), mask, nullptr, Var(), &partners); },
                                       {1e-2f, 3e-3}, "ot with partners");
    testing::check_gradients(
        {x}, [&](const std::vector<Var>& v) { return attention->forward(v[0], v[0], mask, nullptr, Var(), &partners); },
        {1e-2f, 3e-3}, "ot with partners, input");
}

TEST(OtAttention, KindsThatDoNotCompareTemplatesSeeOnlyTheirOwnRow) {
    NoGradScope no_grad;
    const auto attention = attention_of("lnas");
    const Tensor x = random_tensor({3, kLength, kWidth}, 66);
    const Tensor valid = three_rows_valid();
    const nn::TemplatePartners partners{{2, 0, -1}};
    const Tensor alone = attention->forward(Var(x), Var(x), {valid, valid}).value();
    const Tensor with = attention->forward(Var(x), Var(x), {valid, valid}, nullptr, Var(), &partners).value();
    for (int64_t e = 0; e < alone.numel(); ++e) ASSERT_EQ(with.data()[e], alone.data()[e]);
}

TEST(OtAttention, BadPartnersAreErrorsNamingTheRow) {
    const auto attention = attention_of("ot");
    const Var x(random_tensor({3, kLength, kWidth}, 67));
    const auto error_with = [&](const std::vector<int64_t>& partner) {
        const nn::TemplatePartners partners{partner};
        return testing::error_of([&] { attention->forward(x, x, {}, nullptr, Var(), &partners); });
    };
    EXPECT_CONTAINS(error_with({1, 1, -1}), "attention: row 1's template partner 1 is not another row of the batch of 3");
    EXPECT_CONTAINS(error_with({3, -1, -1}), "attention: row 0's template partner 3 is not another row");
    EXPECT_CONTAINS(error_with({1, -1}), "attention: 2 template partners for a batch of 3 rows");
}

}  // namespace
}  // namespace hnas
