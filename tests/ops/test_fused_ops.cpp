// Fused ops against the composed definitions they implement (ops.h): values and every gradient, on
// shapes large enough for the parallel loops, with widths that are no multiple of the kernels' blocks.
#include "test_support.h"

namespace hnas {
namespace {

using testing::random_tensor;

// max |a − b| / (1 + |b|): sums taken in another order differ by their magnitude's rounding.
double worst_difference(const Tensor& a, const Tensor& b) {
    EXPECT_EQ(a.shape(), b.shape());
    double worst = 0;
    for (int64_t i = 0; i < a.numel(); ++i) {
        worst = std::max(worst, std::abs(double{a.data()[i]} - b.data()[i]) / (1.0 + std::abs(b.data()[i])));
    }
    return worst;
}

struct LinearGeluCase {
    ops::GeluForm form;
    bool bias;
};

class LinearGelu : public ::testing::TestWithParam<LinearGeluCase> {};

// Recorded (training): the same product and GELU as gelu(linear(·)), and gradients from the fused
// GELU-derivative-and-bias-sum pass equal to the composed ops' (the bias's sum added to the gradient
// in another order). Each parameter is read twice, so the second backward accumulates into the first's.
// Under bf16 the fused pass writes dh as its bf16 copy alone, which dX and dW must read as the composed
// ops' rounded copy.
void expect_recorded_equals_gelu_of_linear(const LinearGeluCase& param, backend::MatmulPrecision precision) {
    const testing::PrecisionScope scope(precision);
    const auto [form, with_bias] = param;
    const Tensor x = random_tensor({3, 43, 48}, 1, -2.0f, 2.0f), x2 = random_tensor({2, 5, 48}, 2, -2.0f, 2.0f);
    const Tensor w = random_tensor({300, 48}, 3, -0.3f, 0.3f), b = random_tensor({300}, 4);
    auto run = [&](bool fused) {
        std::vector<Var> inputs{Var(x.clone(), true), Var(x2.clone(), true), Var(w.clone(), true), Var(b.clone(), true)};
        const Var bias = with_bias ? inputs[3] : Var();
        auto layer = [&](const Var& in) {
            return fused ? ops::linear_gelu(in, inputs[2], bias, form) : ops::gelu(ops::linear(in, inputs[2], bias), form);
        };
        const Var y = layer(inputs[0]), y2 = layer(inputs[1]);
        ops::add(ops::sum_all(ops::mul(y, Var(random_tensor(y.shape(), 5)))),
                 ops::sum_all(ops::mul(y2, Var(random_tensor(y2.shape(), 6)))))
            .backward();
        std::vector<Tensor> results{y.value(), y2.value()};
        for (size_t i = 0; i < (with_bias ? 4u : 3u); ++i) results.push_back(inputs[i].grad());
        return results;
    };
    const std::vector<Tensor> fused = run(true), composed = run(false);
    const char* names[] = {"output", "second output", "dx", "dx2", "dW", "db"};
    for (size_t i = 0; i < fused.size(); ++i) EXPECT_LE(worst_difference(fused[i], composed[i]), 1e-5) << names[i];
}

TEST_P(LinearGelu, RecordedEqualsGeluOfLinear) { expect_recorded_equals_gelu_of_linear(GetParam(), backend::MatmulPrecision::f32); }

TEST_P(LinearGelu, RecordedEqualsGeluOfLinearUnderBf16) {
    expect_recorded_equals_gelu_of_linear(GetParam(), backend::MatmulPrecision::bf16);
}

// Under bf16, a result only products read (the feed-forward block's, ops::ResultReaders) is written as its
// bf16 copy alone; the fused op, which keeps gelu'(h) in place of h, must give the composed ops' copy and
// gradients. A second product reads it, as the feed-forward's fc2 does.
TEST_P(LinearGelu, ProductsOnlyReaderUnderBf16) {
    const testing::PrecisionScope scope(backend::MatmulPrecision::bf16);
    const auto [form, with_bias] = GetParam();
    const Tensor x = random_tensor({3, 43, 48}, 11, -2.0f, 2.0f), w = random_tensor({300, 48}, 12, -0.3f, 0.3f);
    const Tensor b = random_tensor({300}, 13), w2 = random_tensor({20, 300}, 14, -0.1f, 0.1f);
    auto run = [&](bool fused) {
        std::vector<Var> inputs{Var(x.clone(), true), Var(w.clone(), true), Var(b.clone(), true)};
        const Var bias = with_bias ? inputs[2] : Var();
        const Var hidden = fused ? ops::linear_gelu(inputs[0], inputs[1], bias, form, ops::ResultReaders::products)
                                 : ops::gelu(ops::linear(inputs[0], inputs[1], bias), form, ops::ResultReaders::products);
        const Var y = ops::linear(hidden, Var(w2), Var());
        ops::sum_all(ops::mul(y, Var(random_tensor(y.shape(), 15)))).backward();
        std::vector<Tensor> results{y.value()};
        for (size_t i = 0; i < (with_bias ? 3u : 2u); ++i) results.push_back(inputs[i].grad());
        return results;
    };
    const std::vector<Tensor> fused = run(true), composed = run(false);
    const char* names[] = {"the product of the output", "dx", "dW", "db"};
    for (size_t i = 0; i < fused.size(); ++i) EXPECT_LE(worst_difference(fused[i], composed[i]), 1e-5) << names[i];
}

// Unrecorded (evaluation, decoding): GELU in oneDNN's epilogue, its own erf or tanh against hnas's.
TEST_P(LinearGelu, UnrecordedEqualsGeluOfLinear) {
    const auto [form, with_bias] = GetParam();
    const Var x(random_tensor({7, 41, 48}, 7, -3.0f, 3.0f)), w(random_tensor({300, 48}, 8, -0.3f, 0.3f));
    const Var b = with_bias ? Var(random_tensor({300}, 9)) : Var();
    NoGradScope no_grad;
    const Tensor fused = ops::linear_gelu(x, w, b, form).value();
    const Tensor composed = ops::gelu(ops::linear(x, w, b), form).value();
    EXPECT_LE(worst_difference(fused, composed), 2e-6);
}

INSTANTIATE_TEST_SUITE_P(FormsAndBias, LinearGelu,
                         ::testing::Values(LinearGeluCase{ops::GeluForm::erf, true}, LinearGeluCase{ops::GeluForm::erf, false},
                                           LinearGeluCase{ops::GeluForm::tanh, true}),
                         [](const auto& info) {
                             return std::string(info.param.form == ops::GeluForm::erf ? "erf" : "tanh") +
                                    (info.param.bias ? "_bias" : "_no_bias");
                         });

// Gradients summed over rows (a linear layer's bias, layer norm's weight and bias, fused or not) are
// added up in blocks of rows, the blocks in order (kernels::RowBlockSums): the same bits on one thread
// as on two. 600 rows of 64 are enough for the parallel loops.
TEST(RowSummedGradients, AreTheSameBitsOnAnyThreadCount) {
    const int threads_before = backend::num_threads();
    const auto run = [](int threads) {
        backend::set_num_threads(threads);
        const Var x(random_tensor({4, 150, 48}, 21)), w(random_tensor({64, 48}, 22), true), b(random_tensor({64}, 23), true);
        const Var norm_weight(random_tensor({64}, 24, 0.5f, 1.5f), true), norm_bias(random_tensor({64}, 25), true);
        const Var residual(random_tensor({4, 150, 64}, 26));
        Rng rng(27);
        const Var sublayer = ops::dropout_add_layer_norm(residual, ops::linear(x, w, b), 0.1f, rng, norm_weight, norm_bias, 1e-5f);
        const Var y = ops::layer_norm(sublayer, norm_weight, norm_bias, 1e-5f);
        ops::sum_all(ops::mul(y, Var(random_tensor(y.shape(), 28)))).backward();
        return std::vector<Tensor>{b.grad(), norm_weight.grad(), norm_bias.grad()};
    };
    const std::vector<Tensor> one = run(1), two = run(2);
    backend::set_num_threads(threads_before);
    const char* names[] = {"linear's bias", "layer norm's weight", "layer norm's bias"};
    for (size_t i = 0; i < one.size(); ++i) EXPECT_TRUE(testing::same_tensor(one[i], two[i])) << names[i];
}

// The error an op throws, or "" when it throws none.
std::string error_of(const std::function<void()>& op) {
    try {
        op();
    } catch (const Error& e) {
        return e.what();
    }
    return "";
}

// layer_norm(dropout_add(·)) fused and composed, with dropout and without: the same mask (the same
// draw from the rng), values and the four inputs' gradients; the residual is read twice, so its
// gradient accumulates. Rows of 300 span more than one of the mask's chunks.
TEST(DropoutAddLayerNorm, EqualsLayerNormOfDropoutAdd) {
    for (float p : {0.0f, 0.25f}) {
        const Tensor residual = random_tensor({4, 29, 300}, 11), branch = random_tensor({4, 29, 300}, 12);
        const Tensor weight = random_tensor({300}, 13, 0.5f, 1.5f), bias = random_tensor({300}, 14);
        auto run = [&](bool fused) {
            std::vector<Var> in{Var(residual.clone(), true), Var(branch.clone(), true), Var(weight.clone(), true),
                                Var(bias.clone(), true)};
            Rng rng(21);
            const Var y = fused ? ops::dropout_add_layer_norm(in[0], in[1], p, rng, in[2], in[3])
                                : ops::layer_norm(p > 0 ? ops::dropout_add(in[0], in[1], p, rng) : ops::add(in[0], in[1]),
                                                  in[2], in[3]);
            ops::add(ops::sum_all(ops::mul(y, Var(random_tensor(y.shape(), 15)))), ops::sum_all(ops::scale(in[0], 0.5f)))
                .backward();
            std::vector<Tensor> results{y.value(), Tensor::from_floats({1}, {static_cast<float>(rng.uniform())})};
            for (const Var& input : in) results.push_back(input.grad());
            return results;
        };
        const std::vector<Tensor> fused = run(true), composed = run(false);
        const char* names[] = {"output", "the rng's next draw", "d residual", "d branch", "d weight", "d bias"};
        for (size_t i = 0; i < fused.size(); ++i) {
            EXPECT_LE(worst_difference(fused[i], composed[i]), 1e-6) << names[i] << ", p " << p;
        }
    }
}

TEST(DropoutAddLayerNorm, MismatchNamesTheOpAndBothShapes) {
    const Var a(random_tensor({2, 4}, 1)), b(random_tensor({2, 5}, 2)), w(random_tensor({4}, 3));
    Rng rng(1);
    EXPECT_NE(error_of([&] { ops::dropout_add_layer_norm(a, b, 0.1f, rng, w, w); })
                  .find("dropout_add_layer_norm: residual (2, 4) and branch (2, 5) differ"),
              std::string::npos);
    EXPECT_NE(error_of([&] { ops::dropout_add_layer_norm(a, a, 1.0f, rng, w, w); }).find("probability must be in [0, 1)"),
              std::string::npos);
}

TEST(LinearGeluShapes, MismatchNamesTheOpAndBothShapes) {
    const Var x(random_tensor({2, 5}, 1)), w(random_tensor({3, 4}, 2)), b(random_tensor({4}, 3)), x4(random_tensor({2, 4}, 4));
    EXPECT_NE(error_of([&] { ops::linear_gelu(x, w, Var(), ops::GeluForm::erf); })
                  .find("linear_gelu: input (2, 5) does not match weight (3, 4)"),
              std::string::npos);
    EXPECT_NE(error_of([&] { ops::linear_gelu(x4, w, b, ops::GeluForm::erf); })
                  .find("linear_gelu: bias (4) does not match weight (3, 4)"),
              std::string::npos);
}

}  // namespace
}  // namespace hnas
