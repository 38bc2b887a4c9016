// Backend kernels against naive double-precision loops: oneDNN matmul in every layout it is called
// with, the primitive cache, and hnas's own broadcast and reduction loops.
#include <limits>

#include "backend/kernels.h"
#include "backend/matmul.h"
#include "test_support.h"

namespace hnas {
namespace {

using testing::random_tensor;

struct MatmulCase {
    backend::MatmulShape shape;
    backend::MatmulOptions options;
};

// The reference: C[b] = alpha · op(A[b]) · op(B[b]) + bias (+ C), accumulated in double.
std::vector<double> naive_matmul(const Tensor& a, const Tensor& b, const Tensor& c_before, const Tensor& bias,
                                 const backend::MatmulShape& s, const backend::MatmulOptions& o) {
    std::vector<double> c(static_cast<size_t>(s.batch * s.m * s.n));
    for (int64_t p = 0; p < s.batch; ++p) {
        for (int64_t i = 0; i < s.m; ++i) {
            for (int64_t j = 0; j < s.n; ++j) {
                double total = 0.0;
                for (int64_t q = 0; q < s.k; ++q) {
                    const float av = a.data()[p * s.m * s.k + (s.trans_a ? q * s.m + i : i * s.k + q)];
                    const int64_t b_base = s.shared_b ? 0 : p * s.k * s.n;
                    const float bv = b.data()[b_base + (s.trans_b ? j * s.k + q : q * s.n + j)];
                    total += static_cast<double>(av) * bv;
                }
                total *= o.alpha;
                if (o.bias) total += bias.data()[j];
                const size_t at = static_cast<size_t>((p * s.m + i) * s.n + j);
                if (o.accumulate) total += c_before.data()[at];
                c[at] = total;
            }
        }
    }
    return c;
}

TEST(BackendMatmul, MatchesNaiveLoopsInEveryLayout) {
    uint64_t seed = 1;
    for (bool trans_a : {false, true}) {
        for (bool trans_b : {false, true}) {
            for (bool shared_b : {false, true}) {
                for (bool accumulate : {false, true}) {
                    for (bool with_bias : {false, true}) {
                        const backend::MatmulShape s{3, 5, 7, 6, trans_a, trans_b, shared_b};
                        const Tensor a = random_tensor({s.batch, s.m * s.k}, seed++);
                        const Tensor b = random_tensor({shared_b ? 1 : s.batch, s.k * s.n}, seed++);
                        const Tensor bias = random_tensor({s.n}, seed++);
                        Tensor c = random_tensor({s.batch, s.m * s.n}, seed++);
                        const Tensor c_before = c.clone();
                        // oneDNN would scale the bias too, so the backend refuses alpha together with a bias.
                        const backend::MatmulOptions o{with_bias ? 1.0f : 0.75f, with_bias ? bias.data() : nullptr,
                                                       accumulate};
                        backend::matmul(a.data(), b.data(), c.data(), s, o);
                        const std::vector<double> expected = naive_matmul(a, b, c_before, bias, s, o);
                        for (size_t i = 0; i < expected.size(); ++i) {
                            ASSERT_NEAR(c.data()[i], expected[i], 1e-5)
                                << "trans_a " << trans_a << " trans_b " << trans_b << " shared_b " << shared_b
                                << " accumulate " << accumulate << " bias " << with_bias << " element " << i;
                        }
                    }
                }
            }
        }
    }
}

TEST(BackendMatmul, ReusesCachedPrimitives) {
    const Tensor a = random_tensor({9, 4}, 1), b = random_tensor({4, 11}, 2);
    Tensor c = Tensor::empty({9, 11});
    backend::matmul(a.data(), b.data(), c.data(), {1, 9, 11, 4});
    const size_t after_first = backend::matmul_primitives_created();
    for (int i = 0; i < 5; ++i) backend::matmul(a.data(), b.data(), c.data(), {1, 9, 11, 4});
    EXPECT_EQ(backend::matmul_primitives_created(), after_first);
    backend::matmul(a.data(), b.data(), c.data(), {1, 9, 11, 4}, {2.0f, nullptr, false});
    EXPECT_EQ(backend::matmul_primitives_created(), after_first + 1);  // a new alpha is a new primitive
}

TEST(BackendMatmul, RejectsAlphaWithBias) {
    const Tensor a = random_tensor({2, 2}, 1), b = random_tensor({2, 2}, 2), bias = random_tensor({2}, 3);
    Tensor c = Tensor::empty({2, 2});
    EXPECT_THROW(backend::matmul(a.data(), b.data(), c.data(), {1, 2, 2, 2}, {0.5f, bias.data(), false}), Error);
}

TEST(BackendKernels, BroadcastBinaryMatchesIndexArithmetic) {
    const Shape a_shape{2, 1, 4, 3}, b_shape{3, 1, 3}, out_shape{2, 3, 4, 3};
    const Tensor a = random_tensor(a_shape, 5), b = random_tensor(b_shape, 6);
    Tensor out = Tensor::empty(out_shape);
    kernels::broadcast_binary(a.data(), a_shape, b.data(), b_shape, out.data(), out_shape,
                              [](float x, float y) { return x * 10.0f + y; });
    for (int64_t i = 0; i < 2; ++i)
        for (int64_t j = 0; j < 3; ++j)
            for (int64_t k = 0; k < 4; ++k)
                for (int64_t l = 0; l < 3; ++l) {
                    const float expected = a.data()[(i * 4 + k) * 3 + l] * 10.0f + b.data()[j * 3 + l];
                    ASSERT_FLOAT_EQ(out.data()[((i * 3 + j) * 4 + k) * 3 + l], expected);
                }
}

TEST(BackendKernels, AccumulateReducedSumsBroadcastAxes) {
    const Tensor src = random_tensor({2, 3, 4}, 7);
    for (const Shape& target : {Shape{4}, Shape{3, 1}, Shape{2, 1, 4}, Shape{1}, Shape{2, 3, 4}}) {
        std::vector<double> expected(static_cast<size_t>(shape_numel(target)), 0.5);
        const std::vector<int64_t> strides = broadcast_strides(target, src.shape());
        for (int64_t i = 0; i < 2; ++i)
            for (int64_t j = 0; j < 3; ++j)
                for (int64_t k = 0; k < 4; ++k)
                    expected[static_cast<size_t>(i * strides[0] + j * strides[1] + k * strides[2])] +=
                        src.data()[(i * 3 + j) * 4 + k];
        Tensor dst = Tensor::full(target, 0.5f);
        kernels::accumulate_reduced(src, dst, true);
        for (int64_t i = 0; i < dst.numel(); ++i) {
            ASSERT_NEAR(dst.data()[i], expected[static_cast<size_t>(i)], 1e-5) << shape_str(target) << " element " << i;
        }
        kernels::accumulate_reduced(src, dst, false);  // overwrite mode ignores the old contents
        for (int64_t i = 0; i < dst.numel(); ++i) {
            ASSERT_NEAR(dst.data()[i], expected[static_cast<size_t>(i)] - 0.5, 1e-5) << shape_str(target);
        }
    }
}

TEST(BackendKernels, PermuteCopyMatchesIndexArithmetic) {
    const Tensor in = random_tensor({2, 3, 4}, 8);
    Tensor out = Tensor::empty({4, 2, 3});
    kernels::permute_copy(in.data(), in.shape(), {2, 0, 1}, out.data());
    for (int64_t i = 0; i < 2; ++i)
        for (int64_t j = 0; j < 3; ++j)
            for (int64_t k = 0; k < 4; ++k) ASSERT_EQ(out.data()[(k * 2 + i) * 3 + j], in.data()[(i * 3 + j) * 4 + k]);
}

// The vectorizable exp and erf of the hot loops against libm over their whole useful range, with
// exp's exact 0 for masked (-inf) entries.
TEST(BackendKernels, FastExpAndErfMatchLibm) {
    double worst_exp = 0, worst_erf = 0;
    for (int i = -200000; i <= 200000; ++i) {
        const float x = static_cast<float>(i) * 4.3e-4f;  // -86 .. 86
        worst_exp = std::max(worst_exp, std::abs(kernels::fast_exp(x) / std::exp(static_cast<double>(x)) - 1.0));
        const float z = static_cast<float>(i) * 3e-5f;  // -6 .. 6
        worst_erf = std::max(worst_erf, std::abs(kernels::fast_erf(z) - std::erf(static_cast<double>(z))));
    }
    EXPECT_LT(worst_exp, 5e-7) << "relative error of fast_exp";
    EXPECT_LT(worst_erf, 1e-6) << "absolute error of fast_erf";
    EXPECT_EQ(kernels::fast_exp(-std::numeric_limits<float>::infinity()), 0.0f);
    EXPECT_EQ(kernels::fast_erf(0.0f), 0.0f);
}

}  // namespace
}  // namespace hnas
