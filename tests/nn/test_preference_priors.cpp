// Paper 003's preference priors as a part of every kind (§7, Eq. 18–20): α on the evidence, the
// context-dependent preference network, and the relative-position prior, all added as log u before any
// normalization. At their start the priors change nothing, for every kind (with them off, the layer is
// the one tests/fixtures/attention.json pins, which was written before they existed); α scales the
// evidence alone; the context preference ignores padding, matches finite differences, and keeps its
// value across the steps of cross-attention decoding; configs refuse it where it would see the future.
#include <cmath>

#include "config/experiment_config.h"
#include "nn/attention.h"
#include "tasks/task.h"
#include "test_support.h"

namespace hnas {
namespace {

using testing::random_tensor;

constexpr int64_t kWidth = 8, kHeads = 2, kBatch = 2;

Tensor valid_rows(int64_t length, const std::vector<int64_t>& real) {
    std::vector<float> values;
    for (int64_t count : real)
        for (int64_t t = 0; t < length; ++t) values.push_back(t < count ? 1.0f : 0.0f);
    return Tensor::from_floats({static_cast<int64_t>(real.size()), length}, values);
}

nn::AttentionOptions options_of(const std::string& kind, nn::AttentionRole role = nn::AttentionRole::bidirectional) {
    nn::AttentionOptions options;
    options.width = kWidth;
    options.heads = kHeads;
    options.kind = kind;
    options.role = role;
    return options;
}

// Random values in the context preference's head weights, which start at zero.
void wake_context_prior(nn::MultiHeadAttention& attention, uint64_t seed) {
    Tensor& w = attention.parameter("context_prior.head_weights").value();
    const Tensor drawn = random_tensor(w.shape(), seed, -1.0f, 1.0f);
    std::copy_n(drawn.data(), drawn.numel(), w.data());
}

TEST(PreferencePriors, AtTheirStartEveryKindIsUnchanged) {
    NoGradScope no_grad;
    for (const std::string& kind : nn::attention_kind_names()) {
        if (!nn::find_attention_kind(kind).future_leak.empty()) continue;  // the causal twins run where priors see the past only
        Rng init_a(5), dropout_a(6), init_b(5), dropout_b(6);
        nn::MultiHeadAttention off(options_of(kind), init_a, dropout_a);
        nn::AttentionOptions with = options_of(kind);
        with.prior = nn::RelativePositionOptions{8, 16, true};
        with.context_prior = nn::ContextPreferenceOptions{6};
        nn::MultiHeadAttention start(with, init_b, dropout_b);
        const Tensor x = random_tensor({kBatch, 5, kWidth}, 7), memory = random_tensor({kBatch, 6, kWidth}, 8);
        const Tensor self_valid = valid_rows(5, {5, 3});
        const ops::AttentionMask self_mask{self_valid, self_valid}, cross_mask{valid_rows(6, {6, 4}), self_valid};
        for (const auto& [mem, mask] : {std::pair{x, self_mask}, std::pair{memory, cross_mask}}) {
            const Tensor a = off.forward(Var(x), Var(mem), mask).value(), b = start.forward(Var(x), Var(mem), mask).value();
            for (int64_t e = 0; e < a.numel(); ++e) ASSERT_NEAR(a.data()[e], b.data()[e], 1e-6) << kind << " " << e;
        }
    }
}

// The scores are α·QKᵀ·scale, so α = 2 is α = 1 with the queries doubled; for ot, α weighs the
// evidence only, not the templates' similarity, so the same holds.
TEST(PreferencePriors, AlphaScalesTheEvidenceAlone) {
    NoGradScope no_grad;
    for (const std::string& kind : nn::attention_kind_names()) {
        if (!nn::find_attention_kind(kind).future_leak.empty()) continue;
        Rng init_a(5), dropout_a(6), init_b(5), dropout_b(6), init_c(5), dropout_c(6);
        nn::AttentionOptions doubled = options_of(kind);
        doubled.alpha = 2.0f;
        nn::MultiHeadAttention with_alpha(doubled, init_a, dropout_a), with_queries(options_of(kind), init_b, dropout_b),
            plain(options_of(kind), init_c, dropout_c);
        for (const char* name : {"q_proj.weight", "q_proj.bias"}) {
            Tensor& q = with_queries.parameter(name).value();
            for (int64_t e = 0; e < q.numel(); ++e) q.data()[e] *= 2.0f;
        }
        const Tensor x = random_tensor({kBatch, 5, kWidth}, 9);
        const Tensor valid = valid_rows(5, {5, 4});
        const Tensor a = with_alpha.forward(Var(x), Var(x), {valid, valid}).value();
        const Tensor b = with_queries.forward(Var(x), Var(x), {valid, valid}).value();
        const Tensor c = plain.forward(Var(x), Var(x), {valid, valid}).value();
        double change = 0.0;
        for (int64_t e = 0; e < a.numel(); ++e) {
            ASSERT_NEAR(a.data()[e], b.data()[e], 1e-5) << kind << " " << e;
            change += std::abs(a.data()[e] - c.data()[e]);
        }
        // nap standardizes the scores and non's weights ignore them: α cancels there (but for nap's ε)
        if (kind != "non" && kind != "nap") {
            EXPECT_GT(change, 1e-3) << kind << ": α changed nothing";
        }
    }
}

// The summary is the mean of the real inputs: what padding holds changes no real key's log-weight.
TEST(PreferencePriors, ContextPreferenceIgnoresPaddingAndStartsUniform) {
    NoGradScope no_grad;
    Rng init(3);
    nn::ContextPreference preference(kWidth, kHeads, {6}, init);
    const Tensor valid = valid_rows(5, {5, 3});
    Tensor x = random_tensor({kBatch, 5, kWidth}, 11);
    const Tensor start = preference.forward(Var(x), valid).value();
    ASSERT_EQ(start.shape(), (Shape{kBatch, kHeads, 1, 5}));
    for (int64_t e = 0; e < start.numel(); ++e) ASSERT_EQ(start.data()[e], 0.0f);
    Tensor& w = preference.parameter("head_weights").value();
    const Tensor drawn = random_tensor(w.shape(), 12, -1.0f, 1.0f);
    std::copy_n(drawn.data(), drawn.numel(), w.data());
    const Tensor before = preference.forward(Var(x), valid).value();
    for (int64_t t = 3; t < 5; ++t)
        for (int64_t d = 0; d < kWidth; ++d) x.data()[(5 + t) * kWidth + d] += 7.0f;  // row 1's padding
    const Tensor after = preference.forward(Var(x), valid).value();
    for (int64_t h = 0; h < kHeads; ++h)
        for (int64_t t = 0; t < 3; ++t) {
            const int64_t e = (kHeads + h) * 5 + t;  // row 1's real keys
            EXPECT_EQ(after.data()[e], before.data()[e]) << h << " " << t;
        }
    EXPECT_CONTAINS(testing::error_of([&] { preference.forward(Var(x), valid_rows(4, {4, 4})); }),
                    "context preference: memory (2, 5, 8) and key_valid (2, 4) must be (B, Tk, D) and (B, Tk)");
}

TEST(PreferencePriors, ContextPreferenceMatchesFiniteDifferences) {
    for (const std::string& kind : {std::string("lnas"), std::string("dnas"), std::string("ot")}) {
        nn::AttentionOptions options = options_of(kind);
        options.context_prior = nn::ContextPreferenceOptions{6};
        options.prior = nn::RelativePositionOptions{8, 16, true};
        options.alpha = 0.7f;
        Rng init(13), dropout(14);
        nn::MultiHeadAttention attention(options, init, dropout);
        wake_context_prior(attention, 15);
        const Tensor x = random_tensor({kBatch, 5, kWidth}, 16), memory = random_tensor({kBatch, 6, kWidth}, 17);
        const Tensor self_valid = valid_rows(5, {5, 3});
        const ops::AttentionMask self_mask{self_valid, self_valid}, cross_mask{valid_rows(6, {6, 4}), self_valid};
        testing::check_parameter_gradients(attention, [&] { return attention.forward(Var(x), Var(x), self_mask); }, {1e-2f, 3e-3},
                                           "context prior/" + kind);
        testing::check_gradients({x, memory}, [&](const std::vector<Var>& v) { return attention.forward(v[0], v[1], cross_mask); },
                                 {1e-2f, 3e-3}, "context prior inputs/" + kind);
    }
}

// Decoding reads the cross-attention's context preference from the first step's memory, and beam
// search's reordering of rows carries it along, also when two query rows read each memory row.
TEST(PreferencePriors, CrossAttentionStepsKeepTheContextPreference) {
    NoGradScope no_grad;
    nn::AttentionOptions options = options_of("lnas", nn::AttentionRole::decoder_cross);
    options.context_prior = nn::ContextPreferenceOptions{6};
    Rng init(21), dropout(22);
    nn::MultiHeadAttention attention(options, init, dropout);
    wake_context_prior(attention, 23);
    const Tensor queries = random_tensor({kBatch, 3, kWidth}, 24), memory = random_tensor({kBatch, 6, kWidth}, 25);
    const Tensor key_valid = valid_rows(6, {6, 4});
    const Tensor full = attention.forward(Var(queries), Var(memory), {key_valid, Tensor()}).value();
    nn::AttentionCache cache;
    const std::vector<int64_t> swapped{1, 0}, grouped_rows{1, 1, 0, 0};
    for (int64_t step = 0; step < 3; ++step) {
        // at the last step the memory's rows are swapped and each is read by two query rows
        if (step == 2) cache.keep_rows(grouped_rows, &swapped);
        const std::vector<int64_t> row_sources = step == 2 ? grouped_rows : std::vector<int64_t>{0, 1};
        const auto rows = static_cast<int64_t>(row_sources.size());
        Tensor query = Tensor::empty({rows, 1, kWidth});
        for (int64_t r = 0; r < rows; ++r) {
            std::copy_n(queries.data() + (row_sources[static_cast<size_t>(r)] * 3 + step) * kWidth, kWidth,
                        query.data() + r * kWidth);
        }
        const Tensor& mem = step == 2 ? memory.take_rows(swapped) : memory;
        const Tensor& valid = step == 2 ? key_valid.take_rows(swapped) : key_valid;
        ops::AttentionMask mask{valid, Tensor()};
        mask.query_offset = step;
        const Tensor out = attention.forward(Var(query), Var(mem), mask, &cache).value();
        ASSERT_EQ(out.shape(), (Shape{rows, 1, kWidth}));
        for (int64_t r = 0; r < rows; ++r)
            for (int64_t d = 0; d < kWidth; ++d)
                EXPECT_NEAR(out.data()[r * kWidth + d], full.data()[(row_sources[static_cast<size_t>(r)] * 3 + step) * kWidth + d], 1e-5)
                    << "step " << step << " row " << r;
    }
    ASSERT_EQ(cache.preference.dim(0), kBatch);
}

TEST(PreferencePriors, ConfigsRefuseAContextPriorThatWouldSeeTheFuture) {
    const Json raw = {{"task", "headline"},
                      {"model", {{"attention", {{"decoder", {{"context_prior", {{"enabled", true}}}}}}}}}};
    EXPECT_CONTAINS(testing::error_of([&] { tasks::parse_config(raw); }),
                    "config model.attention.decoder.context_prior.enabled: causal self-attention cannot pool the sequence");
    const Json cross = {{"task", "headline"},
                        {"model", {{"attention", {{"cross", {{"context_prior", {{"enabled", true}, {"hidden", 4}}}}}}}}}};
    const config::ExperimentConfig parsed = tasks::parse_config(cross);
    ASSERT_TRUE(parsed.model.cross_attention.context_prior.has_value());
    EXPECT_EQ(parsed.model.cross_attention.context_prior->hidden, 4);
    const Json zero_alpha = {{"task", "headline"}, {"model", {{"attention", {{"encoder", {{"alpha", 0}}}}}}}};
    EXPECT_CONTAINS(testing::error_of([&] { tasks::parse_config(zero_alpha); }), "config model.attention.encoder.alpha");
    nn::AttentionOptions causal = options_of("lnas", nn::AttentionRole::causal_self);
    causal.context_prior = nn::ContextPreferenceOptions{};
    Rng init(1), dropout(2);
    EXPECT_CONTAINS(testing::error_of([&] { nn::MultiHeadAttention(causal, init, dropout); }),
                    "attention: the context prior pools every position");
}

}  // namespace
}  // namespace hnas
