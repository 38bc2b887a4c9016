// Finite-difference gradient checks for every differentiable op, one table row per case, including
// broadcast and masked variants. Each row runs as its own test (GradCheck/Op.Matches/<name>).
#include "models/bert.h"
#include "test_support.h"

namespace hnas {
namespace {

using testing::check_gradients;
using testing::GradCheckOptions;
using testing::random_tensor;
using testing::TestFunction;

struct GradCase {
    std::string name;
    std::vector<Tensor> inputs;
    TestFunction function;
    GradCheckOptions options = {};
};

Tensor positive(const Shape& shape, uint64_t seed) { return random_tensor(shape, seed, 0.5f, 2.0f); }

// Values at least `gap` away from zero, for functions with a kink at 0.
Tensor away_from_zero(const Shape& shape, uint64_t seed, float gap) {
    Tensor t = random_tensor(shape, seed, gap, 1.0f);
    Rng signs(seed, 3);
    for (int64_t i = 0; i < t.numel(); ++i) t.data()[i] *= signs.uniform() < 0.5f ? -1.0f : 1.0f;
    return t;
}

// An additive mask (0 or kMaskedScore) from a 0/1 keep pattern.
Tensor additive_mask(const Shape& shape, const std::vector<int>& keep) {
    std::vector<float> values;
    for (int k : keep) values.push_back(k ? 0.0f : ops::kMaskedScore);
    return Tensor::from_floats(shape, values);
}

// The same pattern as a multiplicative 0/1 tensor.
Tensor keep_mask(const Shape& shape, const std::vector<int>& keep) {
    return Tensor::from_floats(shape, std::vector<float>(keep.begin(), keep.end()));
}

std::vector<GradCase> all_cases() {
    using ops::GeluForm;
    std::vector<GradCase> cases;
    auto add = [&](std::string name, std::vector<Tensor> inputs, TestFunction f, GradCheckOptions options = {}) {
        cases.push_back({std::move(name), std::move(inputs), std::move(f), options});
    };

    // matmul: every transpose combination, batched, shared right operand, alpha.
    for (bool ta : {false, true}) {
        for (bool tb : {false, true}) {
            add(std::string("matmul_") + (ta ? "ta" : "a") + "_" + (tb ? "tb" : "b"),
                {random_tensor(ta ? Shape{4, 3} : Shape{3, 4}, 1), random_tensor(tb ? Shape{5, 4} : Shape{4, 5}, 2)},
                [ta, tb](const std::vector<Var>& v) { return ops::matmul(v[0], v[1], ta, tb); });
        }
    }
    add("matmul_batched_4d_trans_b_alpha", {random_tensor({2, 2, 3, 4}, 3), random_tensor({2, 2, 5, 4}, 4)},
        [](const std::vector<Var>& v) { return ops::matmul(v[0], v[1], false, true, 0.5f); });
    add("matmul_shared_b", {random_tensor({2, 3, 4}, 5), random_tensor({4, 5}, 6)},
        [](const std::vector<Var>& v) { return ops::matmul(v[0], v[1]); });
    add("matmul_shared_b_trans_a_trans_b", {random_tensor({2, 4, 3}, 7), random_tensor({5, 4}, 8)},
        [](const std::vector<Var>& v) { return ops::matmul(v[0], v[1], true, true); });
    // Products of heads kept side by side in (B, T, H·K) projections.
    add("head_scores_alpha", {random_tensor({2, 3, 6}, 179), random_tensor({2, 4, 6}, 180)},
        [](const std::vector<Var>& v) { return ops::head_scores(v[0], v[1], 3, 0.5f); });
    add("head_context", {random_tensor({2, 3, 3, 4}, 181), random_tensor({2, 4, 6}, 182)},
        [](const std::vector<Var>& v) { return ops::head_context(v[0], v[1]); });
    // Grouped queries: two rows of queries (or weights) a row of keys (beam search's hypotheses).
    add("head_scores_grouped", {random_tensor({4, 1, 6}, 183), random_tensor({2, 3, 6}, 184)},
        [](const std::vector<Var>& v) { return ops::head_scores(v[0], v[1], 3, 0.5f); });
    add("head_context_grouped", {random_tensor({4, 3, 1, 4}, 185), random_tensor({2, 4, 6}, 186)},
        [](const std::vector<Var>& v) { return ops::head_context(v[0], v[1]); });
    add("linear", {random_tensor({2, 3, 4}, 9), random_tensor({5, 4}, 10), random_tensor({5}, 11)},
        [](const std::vector<Var>& v) { return ops::linear(v[0], v[1], v[2]); });
    add("linear_no_bias", {random_tensor({3, 4}, 12), random_tensor({2, 4}, 13)},
        [](const std::vector<Var>& v) { return ops::linear(v[0], v[1], Var()); });
    // The numeric side evaluates without recording, so it runs the product's GELU epilogue.
    for (GeluForm form : {GeluForm::erf, GeluForm::tanh}) {
        add(form == GeluForm::erf ? "linear_gelu" : "linear_gelu_tanh",
            {random_tensor({2, 3, 4}, 14), random_tensor({5, 4}, 15), random_tensor({5}, 16)},
            [form](const std::vector<Var>& v) { return ops::linear_gelu(v[0], v[1], v[2], form); });
    }
    add("linear_gelu_no_bias", {random_tensor({3, 4}, 17), random_tensor({2, 4}, 18)},
        [](const std::vector<Var>& v) { return ops::linear_gelu(v[0], v[1], Var(), GeluForm::erf); });

    // Broadcasting binary ops.
    const std::vector<std::pair<Shape, Shape>> broadcasts{
        {{2, 3, 4}, {2, 3, 4}}, {{2, 3, 4}, {4}}, {{2, 3, 4}, {2, 1, 4}}, {{3, 1}, {1, 4}}, {{2, 1, 4}, {3, 1}}};
    for (size_t i = 0; i < broadcasts.size(); ++i) {
        const auto& [sa, sb] = broadcasts[i];
        const std::string suffix = "_" + std::to_string(i);
        add("add" + suffix, {random_tensor(sa, 20 + i), random_tensor(sb, 30 + i)},
            [](const std::vector<Var>& v) { return ops::add(v[0], v[1]); });
        add("sub" + suffix, {random_tensor(sa, 40 + i), random_tensor(sb, 50 + i)},
            [](const std::vector<Var>& v) { return ops::sub(v[0], v[1]); });
        add("mul" + suffix, {random_tensor(sa, 60 + i), random_tensor(sb, 70 + i)},
            [](const std::vector<Var>& v) { return ops::mul(v[0], v[1]); });
        add("div" + suffix, {random_tensor(sa, 80 + i), positive(sb, 90 + i)},
            [](const std::vector<Var>& v) { return ops::div(v[0], v[1]); });
    }
    add("scale", {random_tensor({3, 4}, 100)}, [](const std::vector<Var>& v) { return ops::scale(v[0], -1.5f); });
    add("add_scalar", {random_tensor({3, 4}, 101)}, [](const std::vector<Var>& v) { return ops::add_scalar(v[0], 2.0f); });

    // Unary functions.
    add("exp", {random_tensor({3, 4}, 110)}, [](const std::vector<Var>& v) { return ops::exp(v[0]); });
    add("log", {positive({3, 4}, 111)}, [](const std::vector<Var>& v) { return ops::log(v[0]); });
    add("sqrt", {positive({3, 4}, 112)}, [](const std::vector<Var>& v) { return ops::sqrt(v[0]); });
    add("rsqrt", {positive({3, 4}, 113)}, [](const std::vector<Var>& v) { return ops::rsqrt(v[0]); });
    add("relu", {away_from_zero({3, 4}, 114, 0.1f)}, [](const std::vector<Var>& v) { return ops::relu(v[0]); },
        {1e-3f, 2e-3});
    add("gelu_erf", {random_tensor({3, 4}, 115, -3.0f, 3.0f)},
        [](const std::vector<Var>& v) { return ops::gelu(v[0], GeluForm::erf); });
    add("gelu_tanh", {random_tensor({3, 4}, 116, -3.0f, 3.0f)},
        [](const std::vector<Var>& v) { return ops::gelu(v[0], GeluForm::tanh); });
    add("tanh", {random_tensor({3, 4}, 117, -2.0f, 2.0f)}, [](const std::vector<Var>& v) { return ops::tanh(v[0]); });
    add("sigmoid", {random_tensor({3, 4}, 118, -3.0f, 3.0f)},
        [](const std::vector<Var>& v) { return ops::sigmoid(v[0]); });

    // Reductions along each axis.
    for (int axis : {0, 1, -1}) {
        for (bool keepdim : {false, true}) {
            const std::string suffix = "_axis" + std::to_string(axis < 0 ? 9 : axis) + (keepdim ? "_keep" : "");
            add("sum" + suffix, {random_tensor({2, 3, 4}, 120)},
                [axis, keepdim](const std::vector<Var>& v) { return ops::sum(v[0], axis, keepdim); });
            add("mean" + suffix, {random_tensor({2, 3, 4}, 121)},
                [axis, keepdim](const std::vector<Var>& v) { return ops::mean(v[0], axis, keepdim); });
            add("max" + suffix, {random_tensor({2, 3, 4}, 122)},
                [axis, keepdim](const std::vector<Var>& v) { return ops::max(v[0], axis, keepdim); }, {1e-4f, 2e-3});
            add("logsumexp" + suffix, {random_tensor({2, 3, 4}, 123, -2.0f, 2.0f)},
                [axis, keepdim](const std::vector<Var>& v) { return ops::logsumexp(v[0], axis, keepdim); });
        }
    }
    add("sum_all", {random_tensor({2, 3}, 124)}, [](const std::vector<Var>& v) { return ops::sum_all(v[0]); });

    // softmax and log-softmax along the key and the query axis of (B, H, Lq, Lk) scores, with masks.
    const Tensor key_padding = additive_mask({2, 1, 1, 4}, {1, 1, 1, 1, 1, 1, 1, 0});
    const Tensor query_padding = additive_mask({2, 1, 3, 1}, {1, 1, 1, 1, 1, 0});
    const Tensor causal = additive_mask({3, 4}, {1, 1, 0, 0, 1, 1, 1, 0, 1, 1, 1, 1});
    const Tensor query_keep = keep_mask({2, 1, 3, 1}, {1, 1, 1, 1, 1, 0});
    const Tensor causal_keep = keep_mask({3, 4}, {1, 1, 0, 0, 1, 1, 1, 0, 1, 1, 1, 1});
    const Tensor key_keep = keep_mask({2, 1, 1, 4}, {1, 1, 1, 1, 1, 1, 1, 0});
    const Tensor scores = random_tensor({2, 2, 3, 4}, 130, -2.0f, 2.0f);
    add("softmax_keys_unmasked", {scores}, [](const std::vector<Var>& v) { return ops::softmax(v[0], -1); });
    add("softmax_keys_key_padding", {scores},
        [key_padding](const std::vector<Var>& v) { return ops::softmax(v[0], -1, key_padding); });
    add("softmax_keys_causal", {scores}, [causal](const std::vector<Var>& v) { return ops::softmax(v[0], 3, causal); });
    add("softmax_queries_query_padding", {scores},
        [query_padding](const std::vector<Var>& v) { return ops::softmax(v[0], -2, query_padding); });
    add("softmax_axis0", {random_tensor({3, 5}, 131)}, [](const std::vector<Var>& v) { return ops::softmax(v[0], 0); });
    // Masked log-softmax outputs sit near kMaskedScore, where f32 cannot resolve a finite difference;
    // the loss ignores them (as attention does), which the keep mask expresses.
    add("log_softmax_keys_unmasked", {scores}, [](const std::vector<Var>& v) { return ops::log_softmax(v[0], -1); });
    add("log_softmax_keys_causal", {scores}, [causal, causal_keep](const std::vector<Var>& v) {
        return ops::mul(ops::log_softmax(v[0], -1, causal), Var(causal_keep));
    });
    add("log_softmax_keys_key_padding", {scores}, [key_padding, key_keep](const std::vector<Var>& v) {
        return ops::mul(ops::log_softmax(v[0], -1, key_padding), Var(key_keep));
    });
    add("log_softmax_queries_query_padding", {scores}, [query_padding, query_keep](const std::vector<Var>& v) {
        return ops::mul(ops::log_softmax(v[0], -2, query_padding), Var(query_keep));
    });

    add("layer_norm", {random_tensor({2, 3, 6}, 140), random_tensor({6}, 141, 0.5f, 1.5f), random_tensor({6}, 142)},
        [](const std::vector<Var>& v) { return ops::layer_norm(v[0], v[1], v[2]); });
    add("dropout", {random_tensor({4, 8}, 150)}, [](const std::vector<Var>& v) {
        Rng rng(5);  // the same mask at every evaluation
        return ops::dropout(v[0], 0.3f, rng);
    });
    add("dropout_add", {random_tensor({4, 8}, 151), random_tensor({4, 8}, 152)}, [](const std::vector<Var>& v) {
        Rng rng(5);
        return ops::dropout_add(v[0], v[1], 0.3f, rng);
    });
    for (float p : {0.0f, 0.3f}) {
        add(p > 0 ? "dropout_add_layer_norm" : "add_layer_norm",
            {random_tensor({2, 3, 6}, 153), random_tensor({2, 3, 6}, 154), random_tensor({6}, 155, 0.5f, 1.5f),
             random_tensor({6}, 156)},
            [p](const std::vector<Var>& v) {
                Rng rng(5);
                return ops::dropout_add_layer_norm(v[0], v[1], p, rng, v[2], v[3]);
            });
    }
    const Tensor ids = Tensor::from_ints({2, 4}, {1, 3, 3, 6, 0, 1, 5, 3});
    add("embedding", {random_tensor({7, 5}, 160)},
        [ids](const std::vector<Var>& v) { return ops::embedding(v[0], ids); });

    add("reshape", {random_tensor({2, 3, 4}, 170)}, [](const std::vector<Var>& v) { return ops::reshape(v[0], {4, -1}); });
    add("transpose", {random_tensor({2, 3, 4}, 171)},
        [](const std::vector<Var>& v) { return ops::transpose(v[0], 0, 2); });
    add("permute", {random_tensor({2, 3, 4, 5}, 172)},
        [](const std::vector<Var>& v) { return ops::permute(v[0], {0, 2, 1, 3}); });
    add("concat_middle", {random_tensor({2, 1, 3}, 173), random_tensor({2, 2, 3}, 174), random_tensor({2, 3, 3}, 175)},
        [](const std::vector<Var>& v) { return ops::concat({v[0], v[1], v[2]}, 1); });
    add("concat_with_reuse", {random_tensor({2, 3}, 176)},
        [](const std::vector<Var>& v) { return ops::concat({v[0], v[0]}, -1); });
    add("slice", {random_tensor({2, 5, 3}, 177)}, [](const std::vector<Var>& v) { return ops::slice(v[0], 1, 1, 4); });
    add("split", {random_tensor({2, 6}, 178)}, [](const std::vector<Var>& v) {
        std::vector<Var> parts = ops::split(v[0], {1, 2, 3}, 1);
        return ops::concat({ops::scale(parts[0], 2.0f), parts[2], ops::exp(parts[1])}, 1);
    });

    const Tensor targets = Tensor::from_ints({6}, {2, 0, 4, 1, 0, 3});
    add("cross_entropy", {random_tensor({6, 5}, 180, -2.0f, 2.0f)},
        [targets](const std::vector<Var>& v) { return ops::cross_entropy(v[0], targets); });
    add("cross_entropy_ignore_smoothing", {random_tensor({6, 5}, 181, -2.0f, 2.0f)},
        [targets](const std::vector<Var>& v) { return ops::cross_entropy(v[0], targets, 0, 0.1f); });
    // The BERT heads' losses (src/models/bert.h): regression's mean squared error, and the span loss
    // over start and end logits with a padded position.
    add("regression_loss", {random_tensor({4, 1}, 81)}, [](const std::vector<Var>& v) {
        return models::regression_loss(v[0], Tensor::from_floats({4}, {0.5f, -1.0f, 2.0f, 0.0f}));
    });
    add("span_loss", {random_tensor({2, 5}, 82), random_tensor({2, 5}, 83)}, [](const std::vector<Var>& v) {
        const Tensor padding = Tensor::from_floats({2, 5}, {0, 0, 0, 0, ops::kMaskedScore, 0, 0, 0, 0, 0});
        const models::SpanLogits logits{ops::add(v[0], Var(padding)), ops::add(v[1], Var(padding))};
        return models::span_loss(logits, Tensor::from_ints({2}, {1, 0}), Tensor::from_ints({2}, {3, 4}));
    });
    return cases;
}

void PrintTo(const GradCase& c, std::ostream* out) { *out << c.name; }

class GradCheck : public ::testing::TestWithParam<GradCase> {};

TEST_P(GradCheck, Matches) {
    const GradCase& c = GetParam();
    const double worst = check_gradients(c.inputs, c.function, c.options, c.name);
    RecordProperty("worst_error", std::to_string(worst));
}

INSTANTIATE_TEST_SUITE_P(Op, GradCheck, ::testing::ValuesIn(all_cases()),
                         [](const ::testing::TestParamInfo<GradCase>& info) { return info.param.name; });

// Gradients of a value used twice add up, and a second backward adds to the first.
TEST(Autograd, GradientsAccumulate) {
    Var x(Tensor::from_floats({2}, {1.0f, 2.0f}), true);
    Var y = ops::sum_all(ops::mul(x, x));  // d/dx Σx² = 2x
    y.backward();
    EXPECT_FLOAT_EQ(x.grad().data()[0], 2.0f);
    EXPECT_FLOAT_EQ(x.grad().data()[1], 4.0f);
    Var z = ops::sum_all(ops::scale(x, 3.0f));
    z.backward();
    EXPECT_FLOAT_EQ(x.grad().data()[0], 5.0f);
    x.zero_grad();
    EXPECT_FALSE(x.grad().defined());
}

// An interior value whose last Var is gone is freed before backward (scale's backward reads neither its
// input nor its output); a value some Var still holds stays, and the gradients are unchanged.
TEST(Autograd, InteriorValuesNoVarHoldsAreReleased) {
    const int64_t n = 1 << 16;
    const int64_t bytes = n * static_cast<int64_t>(sizeof(float));
    Var x(Tensor::full({n}, 1.0f), true);
    Var doubled = ops::scale(x, 2.0f);
    Var kept = doubled;  // a second handle: dropping the first keeps the value
    Var loss = ops::sum_all(ops::scale(ops::scale(doubled, 3.0f), 0.5f));
    doubled = Var();
    const int64_t live_with_both = tensor_memory().live;
    kept = Var();
    EXPECT_EQ(tensor_memory().live, live_with_both - bytes) << "the last handle of an interior value frees it";
    Var held = ops::scale(x, 4.0f);
    Var other_loss = ops::sum_all(ops::scale(held, 0.25f));
    loss.backward();
    other_loss.backward();
    EXPECT_FLOAT_EQ(x.grad().data()[0], 3.0f + 1.0f);  // 2·3·0.5 and 4·0.25
    EXPECT_FLOAT_EQ(held.value().data()[n - 1], 4.0f);
    EXPECT_FLOAT_EQ(loss.item(), 3.0f * static_cast<float>(n));
}

TEST(Autograd, NoGradScopeRecordsNothing) {
    Var x(Tensor::from_floats({2}, {1.0f, 2.0f}), true);
    NoGradScope no_grad;
    Var y = ops::sum_all(ops::exp(x));
    EXPECT_FALSE(y.requires_grad());
    EXPECT_THROW(y.backward(), Error);
}

// Var::backward's leaf_ready hook fires once for every leaf the pass reaches, as soon as no node left
// to run can add to its gradient: a leaf used next to the loss is reported while the gradients of the
// leaves used earlier are still to come, every reported gradient equals the one the pass ends with, and
// neither a leaf the loss does not depend on nor an input without a gradient is reported. node_done
// fires after every interior node.
TEST(Autograd, LeafReadyFiresOnceWhenTheGradientIsFinal) {
    Var x(Tensor::from_floats({3}, {0.5f, -1.0f, 2.0f}));
    Var first(Tensor::from_floats({3}, {1.0f, 2.0f, 3.0f}), true);  // used at the start and again at the end
    Var middle(Tensor::from_floats({3}, {0.2f, 0.3f, 0.4f}), true);
    Var last(Tensor::from_floats({3}, {-1.0f, 0.5f, 1.5f}), true);
    Var unused(Tensor::full({3}, 1.0f), true);
    Var h = ops::mul(ops::exp(ops::mul(x, first)), middle);
    Var loss = ops::sum_all(ops::add(ops::mul(ops::exp(h), last), ops::mul(first, first)));

    const std::map<const Node*, std::string> names = {
        {first.node(), "first"}, {middle.node(), "middle"}, {last.node(), "last"}, {unused.node(), "unused"}, {x.node(), "x"}};
    std::vector<std::string> reported;
    std::map<std::string, Tensor> at_report;
    std::vector<std::string> nodes_done;
    BackwardHooks hooks;
    hooks.leaf_ready = [&](Node& leaf) {
        const std::string& name = names.at(&leaf);
        reported.push_back(name);
        at_report[name] = leaf.grad.clone();
        if (name == "last") {
            EXPECT_FALSE(middle.grad().defined()) << "'last' is final before 'middle' gets a gradient";
        }
    };
    hooks.node_done = [&](const Node& node) { nodes_done.push_back(node.op); };
    loss.backward(Tensor::full({}, 1.0f), hooks);
    EXPECT_EQ(reported, (std::vector<std::string>{"last", "middle", "first"}));
    auto count = [&](const std::string& op) { return std::count(nodes_done.begin(), nodes_done.end(), op); };
    EXPECT_EQ(count("mul"), 4);
    EXPECT_EQ(count("exp"), 2);
    EXPECT_EQ(count("add"), 1);
    EXPECT_EQ(nodes_done.back(), "mul") << "x·first, the first op of the forward pass, runs last";
    for (const auto& [name, leaf] : std::vector<std::pair<std::string, Var>>{{"first", first}, {"middle", middle}, {"last", last}}) {
        ASSERT_TRUE(at_report.count(name)) << name;
        for (int64_t i = 0; i < 3; ++i) EXPECT_EQ(at_report[name].data()[i], leaf.grad().data()[i]) << name << " [" << i << "]";
    }
}

TEST(Autograd, BackwardNeedsAScalar) {
    Var x(Tensor::from_floats({2}, {1.0f, 2.0f}), true);
    EXPECT_THROW(ops::exp(x).backward(), Error);
}

}  // namespace
}  // namespace hnas
