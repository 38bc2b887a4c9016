// Backend kernels against naive double-precision loops: oneDNN matmul in every layout it is called
// with, in f32 and in bf16, the primitive cache, hnas's own broadcast and reduction loops, and the
// rounding of f32 to bf16.
#include <array>
#include <bit>
#include <limits>
#include <random>
#include <tuple>

#include "backend/kernels.h"
#include "backend/matmul.h"
#include "ops/ops.h"
#include "test_support.h"

namespace hnas {
namespace {

using testing::random_tensor;

// One problem in one layout, with its random inputs. oneDNN would scale a bias too, so the backend
// refuses alpha together with a bias: cases without a bias scale by 0.75 instead.
struct MatmulCase {
    backend::MatmulShape shape;
    bool accumulate, with_bias;
    Tensor a, b, bias, c_before;

    backend::MatmulOptions options() const {
        return {with_bias ? 1.0f : 0.75f, with_bias ? bias.data() : nullptr, accumulate};
    }
    std::string name() const {
        return "trans_a " + std::to_string(shape.trans_a) + " trans_b " + std::to_string(shape.trans_b) + " shared_b " +
               std::to_string(shape.shared_b) + " accumulate " + std::to_string(accumulate) + " bias " +
               std::to_string(with_bias) + " (batch " + std::to_string(shape.batch) + ", m " + std::to_string(shape.m) +
               ", n " + std::to_string(shape.n) + ", k " + std::to_string(shape.k) + ")";
    }
    // C as the backend leaves it: c_before, overwritten or accumulated into.
    Tensor run() const {
        Tensor c = c_before.clone();
        backend::matmul(a.data(), b.data(), c.data(), shape, options());
        return c;
    }
};

// Every combination of transposes, shared B, accumulation and bias on the problem (batch, m, n, k).
std::vector<MatmulCase> every_layout(int64_t batch, int64_t m, int64_t n, int64_t k) {
    std::vector<MatmulCase> cases;
    uint64_t seed = 1;
    for (bool trans_a : {false, true}) {
        for (bool trans_b : {false, true}) {
            for (bool shared_b : {false, true}) {
                for (bool accumulate : {false, true}) {
                    for (bool with_bias : {false, true}) {
                        MatmulCase c{{batch, m, n, k, trans_a, trans_b, shared_b}, accumulate, with_bias, {}, {}, {}, {}};
                        c.a = random_tensor({batch, m * k}, seed++);
                        c.b = random_tensor({shared_b ? 1 : batch, k * n}, seed++);
                        c.bias = random_tensor({n}, seed++);
                        c.c_before = random_tensor({batch, m * n}, seed++);
                        cases.push_back(std::move(c));
                    }
                }
            }
        }
    }
    return cases;
}

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
    for (const MatmulCase& mc : every_layout(3, 5, 7, 6)) {
        const Tensor c = mc.run();
        const std::vector<double> expected = naive_matmul(mc.a, mc.b, mc.c_before, mc.bias, mc.shape, mc.options());
        for (size_t i = 0; i < expected.size(); ++i) {
            ASSERT_NEAR(c.data()[i], expected[i], 1e-5) << mc.name() << " element " << i;
        }
    }
}

Tensor rounded_to_bf16(const Tensor& x) {
    Tensor out = Tensor::empty(x.shape());
    for (int64_t i = 0; i < x.numel(); ++i) out.data()[i] = kernels::bf16_to_float(kernels::round_to_bf16(x.data()[i]));
    return out;
}

Tensor absolute(const Tensor& x) {
    Tensor out = Tensor::empty(x.shape());
    for (int64_t i = 0; i < x.numel(); ++i) out.data()[i] = std::abs(x.data()[i]);
    return out;
}

// bf16 products in every layout, on a small problem and on two large enough for oneDNN's blocked
// (AMX / AVX512-BF16) kernels, one of a single product (with A transposed, split over the threads). With u = 2⁻⁸, bf16's unit roundoff (8 significant bits), and
// M = Σ_q |alpha·a_iq·b_qj|, each product of rounded operands is off by at most (2u + u²)·|a·b|, so
// |C − exact| ≤ (2u + u²)·M + the f32 error. That bound would also hold for f32 products; what proves
// the operands were rounded is that C matches the double-precision product of the *rounded* operands to
// f32 accuracy, (k + 3)·2⁻²³ relative to M + |bias| + |C before| (f32 accumulation, scaling, bias and sum
// post-op), far below bf16's effect — and that C differs from the f32 result.
// bf16 is taken where oneDNN has it and refused up front, naming what is missing, where it has not.
// oneDNN's reference kernel takes milliseconds where its generated ones take microseconds: a layout
// it falls to is a defect of the descriptors (a shared transposed B once was, in every context prior).
TEST(BackendMatmul, NoLayoutFallsToTheReferenceKernel) {
    const auto reference_primitives_after = [](int64_t batch) {
        const int64_t created = backend::matmul_stats().primitives;
        for (const MatmulCase& mc : every_layout(batch, 48, 4, 32)) mc.run();
        EXPECT_GT(backend::matmul_stats().primitives, created) << "no new primitive: nothing was checked";
        return backend::matmul_stats().reference_primitives;
    };
    const int64_t before = backend::matmul_stats().reference_primitives;
    EXPECT_EQ(reference_primitives_after(1), before);
    EXPECT_EQ(reference_primitives_after(3), before);
    if (!backend::bf16_matmul_available()) return;
    testing::PrecisionScope bf16(backend::MatmulPrecision::bf16);
    EXPECT_EQ(reference_primitives_after(1), before);
    EXPECT_EQ(reference_primitives_after(3), before);
}

TEST(BackendMatmul, Bf16IsRefusedClearlyOnACpuWithoutIt) {
    if (backend::bf16_matmul_available()) {
        const testing::PrecisionScope bf16(backend::MatmulPrecision::bf16);
        EXPECT_EQ(backend::matmul_precision(), backend::MatmulPrecision::bf16);
    } else {
        EXPECT_CONTAINS(testing::error_of([] { backend::set_matmul_precision(backend::MatmulPrecision::bf16); }),
                        "precision bf16: oneDNN has no bf16 matmul on this CPU");
        EXPECT_EQ(backend::matmul_precision(), backend::MatmulPrecision::f32);
    }
}

TEST(BackendMatmul, Bf16RoundsTheOperandsAndAccumulatesInF32InEveryLayout) {
    HNAS_SKIP_WITHOUT_BF16();
    const double u = std::ldexp(1.0, -8);
    for (const auto& [batch, m, n, k] : {std::array<int64_t, 4>{3, 5, 7, 6}, std::array<int64_t, 4>{2, 64, 80, 96},
                                         std::array<int64_t, 4>{1, 64, 80, 96}}) {
        for (const MatmulCase& mc : every_layout(batch, m, n, k)) {
            const Tensor c_f32 = mc.run();
            Tensor c_bf16;
            {
                testing::PrecisionScope bf16(backend::MatmulPrecision::bf16);
                c_bf16 = mc.run();
            }
            const backend::MatmulOptions o = mc.options();
            const std::vector<double> exact = naive_matmul(mc.a, mc.b, mc.c_before, mc.bias, mc.shape, o);
            const std::vector<double> of_rounded =
                naive_matmul(rounded_to_bf16(mc.a), rounded_to_bf16(mc.b), mc.c_before, mc.bias, mc.shape, o);
            const std::vector<double> magnitude = naive_matmul(absolute(mc.a), absolute(mc.b), mc.c_before, mc.bias,
                                                               mc.shape, {std::abs(o.alpha), nullptr, false});
            int64_t differing = 0;
            for (size_t i = 0; i < exact.size(); ++i) {
                const double others = (o.bias ? std::abs(mc.bias.data()[i % static_cast<size_t>(n)]) : 0.0) +
                                      (o.accumulate ? std::abs(mc.c_before.data()[i]) : 0.0);
                const double f32_error = static_cast<double>(k + 3) * std::ldexp(1.0, -23) * (magnitude[i] + others);
                ASSERT_NEAR(c_bf16.data()[i], of_rounded[i], f32_error) << mc.name() << " element " << i;
                ASSERT_NEAR(c_bf16.data()[i], exact[i], (2 * u + u * u) * magnitude[i] + f32_error)
                    << mc.name() << " element " << i;
                differing += c_bf16.data()[i] != c_f32.data()[i];
            }
            EXPECT_GT(differing, static_cast<int64_t>(exact.size()) / 2) << mc.name() << ": bf16 results equal f32's";
        }
    }
}

// f32 results do not depend on a bf16 phase in between: the precision is part of the primitive cache's
// key, and switching back runs the cached f32 primitive again.
TEST(BackendMatmul, PrecisionIsPartOfTheCacheKey) {
    HNAS_SKIP_WITHOUT_BF16();
    const MatmulCase mc = every_layout(2, 9, 11, 4).front();
    const Tensor before = mc.run();
    const int64_t primitives = backend::matmul_stats().primitives;
    {
        testing::PrecisionScope bf16(backend::MatmulPrecision::bf16);
        EXPECT_EQ(backend::matmul_precision(), backend::MatmulPrecision::bf16);
        mc.run();
        EXPECT_EQ(backend::matmul_stats().primitives, primitives + 1);
    }
    EXPECT_EQ(backend::matmul_precision(), backend::MatmulPrecision::f32);
    EXPECT_TRUE(testing::same_tensor(mc.run(), before));
    EXPECT_EQ(backend::matmul_stats().primitives, primitives + 1);
    EXPECT_STREQ(name_of(backend::MatmulPrecision::bf16), "bf16");
    EXPECT_STREQ(name_of(backend::MatmulPrecision::f32), "f32");
}

// A tensor given as operand() keeps its bf16 copy: later products read it and give the bits that
// converting each time gives; after the tensor is written, the next product converts it again. Under
// f32, operand() makes no copy.
TEST(BackendMatmul, TensorOperandsAreConvertedOnceUntilWritten) {
    HNAS_SKIP_WITHOUT_BF16();
    MatmulCase mc = every_layout(2, 64, 80, 96)[5];
    const auto run_with_operands = [&mc] {
        Tensor c = mc.c_before.clone();
        backend::matmul(backend::operand(mc.a), backend::operand(mc.b), c.data(), mc.shape, mc.options());
        return c;
    };
    {
        testing::PrecisionScope bf16(backend::MatmulPrecision::bf16);
        const Tensor converted_each_time = mc.run();
        EXPECT_TRUE(testing::same_tensor(run_with_operands(), converted_each_time));
        EXPECT_TRUE(mc.a.bf16_copy().second);
        EXPECT_TRUE(mc.b.bf16_copy().second);
        EXPECT_TRUE(testing::same_tensor(run_with_operands(), converted_each_time));
        float* a = mc.a.data();
        for (int64_t i = 0; i < mc.a.numel(); ++i) a[i] = 3.0f - a[i];
        const Tensor after_write = mc.run();
        EXPECT_FALSE(testing::same_tensor(after_write, converted_each_time));
        EXPECT_TRUE(testing::same_tensor(run_with_operands(), after_write));
    }
    const Tensor fresh = random_tensor({4, 4}, 9);
    EXPECT_EQ(backend::operand(fresh).bf16, nullptr);
    EXPECT_FALSE(fresh.bf16_copy().second);
}

// A packed B (backend::packed_operand: kept with its tensor in the kernel's layout) gives the plain
// product in either orientation and precision; after the tensor is written, or the precision changes
// its layout, the next product packs it again (a stale copy would give the old product). The recorder
// marks the call packed and the bound replays it in that layout.
TEST(BackendMatmul, PackedOperandsGiveThePlainProductUntilWritten) {
    const int64_t m = 33, n = 24, k = 40;
    const Tensor a = random_tensor({m, k}, 1), bias = random_tensor({n}, 2);
    std::vector<backend::MatmulPrecision> precisions{backend::MatmulPrecision::f32};
    if (backend::bf16_matmul_available())
        precisions.insert(precisions.end(), {backend::MatmulPrecision::bf16, backend::MatmulPrecision::f32});
    for (bool trans_b : {true, false}) {
        Tensor b = random_tensor({trans_b ? n : k, trans_b ? k : n}, 3);
        const backend::MatmulShape shape{1, m, n, k, false, trans_b, false};
        const auto product = [&](backend::MatmulOperand b_operand) {
            Tensor c = Tensor::empty({m, n});
            backend::matmul(a.data(), b_operand, c.data(), shape, {1.0f, bias.data(), false});
            return c;
        };
        for (backend::MatmulPrecision precision : precisions) {
            testing::PrecisionScope scope(precision);
            for (int write = 0; write < 2; ++write) {
                const Tensor plain = product(b.data());
                std::vector<backend::MatmulCall> calls;
                for (int use = 0; use < 2; ++use) {  // packed on the first use, read as packed on the second
                    backend::MatmulRecorder recorder;
                    const Tensor packed = product(backend::packed_operand(b));
                    calls = recorder.calls();
                    for (int64_t i = 0; i < plain.numel(); ++i)
                        ASSERT_NEAR(packed.data()[i], plain.data()[i], 1e-5f * (1.0f + std::abs(plain.data()[i])))
                            << "trans_b " << trans_b << " " << name_of(precision) << " write " << write << " use " << use
                            << " element " << i;
                }
                ASSERT_EQ(calls.size(), 1u);
                EXPECT_TRUE(calls[0].b_packed);
                EXPECT_GT(backend::matmul_only_seconds(calls, 1, 0), 0.0);
                float* values = b.data();
                for (int64_t i = 0; i < b.numel(); ++i) values[i] = 3.0f - 2.0f * values[i];
            }
        }
    }
    // One tensor read packed in both orientations, as B transposed (k → n) and as B (n → k): each
    // product packs the layout it reads, of the same size.
    const Tensor w = random_tensor({n, k}, 5), a_n = random_tensor({m, n}, 6);
    const auto both_ways = [&](backend::MatmulOperand w_operand) {
        Tensor c = Tensor::empty({2, m * std::max(n, k)});
        backend::matmul(a.data(), w_operand, c.data(), {1, m, n, k, false, true, false});
        backend::matmul(a_n.data(), w_operand, c.data() + m * n, {1, m, k, n, false, false, false});
        return c;
    };
    const Tensor plain = both_ways(w.data());
    for (int round = 0; round < 2; ++round) {
        const Tensor packed = both_ways(backend::packed_operand(w));
        for (int64_t i = 0; i < m * (n + k); ++i)
            ASSERT_NEAR(packed.data()[i], plain.data()[i], 1e-5f * (1.0f + std::abs(plain.data()[i]))) << "element " << i;
    }
    Tensor c = Tensor::empty({2, m, n});
    const Tensor batched_b = random_tensor({2, k, n}, 4);
    EXPECT_THROW(backend::matmul(a.data(), backend::packed_operand(batched_b), c.data(), {2, m / 2, n, k, false, false, false}),
                 Error);
    EXPECT_THROW(backend::matmul(backend::packed_operand(a), w.data(), c.data(), {1, m, n, k, false, true, false}), Error);
}

// A layer's forward packs its weight when no backward will change it (backend::packed_operand:
// decoding, evaluation) and gives what the training forward gives.
TEST(BackendMatmul, ForwardsWithoutGradientsGiveTheTrainingForwardsValues) {
    const Var x(random_tensor({6, 16}, 1)), weight(random_tensor({12, 16}, 2), true), bias(random_tensor({12}, 3), true);
    const Tensor linear = ops::linear(x, weight, bias).value();
    const Tensor linear_gelu = ops::linear_gelu(x, weight, bias, ops::GeluForm::erf).value();
    NoGradScope no_grad;
    const Tensor linear_evaluated = ops::linear(x, weight, bias).value();
    const Tensor linear_gelu_evaluated = ops::linear_gelu(x, weight, bias, ops::GeluForm::erf).value();
    for (int64_t i = 0; i < linear.numel(); ++i) {
        ASSERT_NEAR(linear_evaluated.data()[i], linear.data()[i], 1e-5f) << "linear element " << i;
        ASSERT_NEAR(linear_gelu_evaluated.data()[i], linear_gelu.data()[i], 1e-5f) << "linear_gelu element " << i;
    }
}

// A product written as bf16 alone (MatmulResult::bf16_only) holds the rounding of the f32 result, bit
// for bit, in every layout without accumulation, interleaved heads too; it needs bf16 precision and
// no accumulation.
TEST(BackendMatmul, Bf16OnlyResultsAreTheRoundedF32Results) {
    HNAS_SKIP_WITHOUT_BF16();
    testing::PrecisionScope bf16(backend::MatmulPrecision::bf16);
    const auto check = [](const Tensor& a, const Tensor& b, const backend::MatmulShape& shape,
                          const backend::MatmulOptions& options, const std::string& name) {
        Tensor f32 = Tensor::empty({shape.batch * shape.m * shape.n});
        backend::matmul(a.data(), b.data(), f32.data(), shape, options);
        std::vector<uint16_t> expected(static_cast<size_t>(f32.numel())), rounded(expected.size());
        kernels::convert_to_bf16(f32.data(), expected.data(), f32.numel());
        backend::matmul(a.data(), b.data(), backend::MatmulResult::bf16_only(rounded.data()), shape, options);
        EXPECT_EQ(rounded, expected) << name;
    };
    for (const auto& [batch, m, n, k] : {std::array<int64_t, 4>{3, 5, 7, 6}, std::array<int64_t, 4>{2, 64, 80, 96},
                                         std::array<int64_t, 4>{1, 64, 80, 96}}) {
        for (const MatmulCase& mc : every_layout(batch, m, n, k)) {
            if (!mc.accumulate) check(mc.a, mc.b, mc.shape, mc.options(), mc.name());
        }
    }
    backend::MatmulShape heads{6, 4, 5, 8, false, true, false};
    heads.heads = 3;
    heads.a_interleaved = heads.b_interleaved = heads.c_interleaved = true;
    check(random_tensor({6 * 4 * 8}, 1), random_tensor({6 * 8 * 5}, 2), heads, {}, "interleaved heads");

    const Tensor a = random_tensor({4, 4}, 3), b = random_tensor({4, 4}, 4);
    std::vector<uint16_t> out(16);
    EXPECT_THROW(backend::matmul(a.data(), b.data(), backend::MatmulResult::bf16_only(out.data()), {1, 4, 4, 4},
                                 {1.0f, nullptr, true}),
                 Error);
    testing::PrecisionScope f32(backend::MatmulPrecision::f32);
    EXPECT_THROW(backend::matmul(a.data(), b.data(), backend::MatmulResult::bf16_only(out.data()), {1, 4, 4, 4}), Error);
}

// The ops whose results only products read (ops::ResultReaders::products): under bf16, linear,
// head_context, dropout and GELU write only the bf16 copy, the rounding of what they would write in f32; the
// next product reads it without making f32 values; reading them makes them exactly; and the gradients
// are the same bit for bit. Under f32 the two readers give the same tensors.
TEST(BackendMatmul, ResultsOnlyProductsReadAreWrittenAsBf16Alone) {
    HNAS_SKIP_WITHOUT_BF16();
    for (backend::MatmulPrecision precision : {backend::MatmulPrecision::bf16, backend::MatmulPrecision::f32}) {
        testing::PrecisionScope scope(precision);
        const auto run = [](ops::ResultReaders readers) {
            const Var x(random_tensor({2, 6, 24}, 1), true), weight(random_tensor({24, 24}, 2), true);
            const Var bias(random_tensor({24}, 3), true), weights(random_tensor({2, 3, 5, 6}, 4), true);
            // Each consumer below makes one result of 2·5·24 values; more new bytes than its f32 values
            // would mean it made its input's f32 values.
            bool made_f32 = false;
            const auto consume = [&made_f32](const auto& make) {
                const int64_t live = tensor_memory().live;
                Var out = make();
                made_f32 |= tensor_memory().live - live > 2 * 5 * 24 * 4;
                return out;
            };
            const Var projected = ops::linear(x, weight, bias, readers);  // (2, 6, 24): values of 3 heads of 8
            Rng dropout_rng(5);
            const Var dropped = ops::dropout(weights, 0.25f, dropout_rng, readers);
            const Var context = consume([&] { return ops::head_context(dropped, projected, readers); });  // (2, 5, 24)
            const Var hidden = consume([&] { return ops::linear(context, weight, Var()); });
            const Var activated = ops::gelu(hidden, ops::GeluForm::erf, readers);
            const Var product = consume([&] { return ops::linear(activated, weight, Var()); });
            ops::sum_all(ops::mul(product, product)).backward();
            return std::tuple{
                std::array<Tensor, 4>{projected.value(), dropped.value(), context.value(), activated.value()}, made_f32,
                std::array<Tensor, 4>{x.grad(), weight.grad(), bias.grad(), weights.grad()}};
        };
        const auto [values_any, made_any, grads_any] = run(ops::ResultReaders::any);
        const auto [values, made, grads] = run(ops::ResultReaders::products);
        EXPECT_FALSE(made) << name_of(precision);
        for (size_t v = 0; v < values.size(); ++v) {
            if (precision == backend::MatmulPrecision::bf16) {
                EXPECT_TRUE(testing::same_tensor(values[v], rounded_to_bf16(values_any[v]))) << v;  // made from the copy
                EXPECT_TRUE(testing::holds_current_bf16_copy(values[v])) << v;
            } else {
                EXPECT_TRUE(testing::same_tensor(values[v], values_any[v])) << v;
            }
        }
        for (size_t g = 0; g < grads.size(); ++g) EXPECT_TRUE(testing::same_tensor(grads[g], grads_any[g])) << g;
    }
}

// Under bf16, the ops whose results feed products write the bf16 copies themselves:
// layer norm's, GELU's and dropout's outputs, the gradients GELU, cross-entropy, a residual dropout's
// branch and the attention normalizations hand back. Under f32, none.
TEST(BackendMatmul, OpsFeedingProductsWriteTheirOperandsBf16Copies) {
    HNAS_SKIP_WITHOUT_BF16();
    const auto run = [](backend::MatmulPrecision precision) {
        testing::PrecisionScope scope(precision);
        const Var x(random_tensor({6, 40}, 3)), weight(random_tensor({40}, 5)), bias(random_tensor({40}, 6));
        const Var hidden(random_tensor({6, 40}, 7), true), logits(random_tensor({5, 40}, 4), true);
        const Var normalized = ops::layer_norm(x, weight, bias, 1e-5f);
        const Var activated = ops::gelu(hidden);
        Rng dropout_rng(9);
        const Var dropped = ops::dropout(Var(random_tensor({6, 40}, 8)), 0.3f, dropout_rng);
        const Var branch(random_tensor({6, 40}, 15), true);  // a residual branch: its gradient feeds its linear layer
        const Var summed = ops::dropout_add(Var(random_tensor({6, 40}, 16)), branch, 0.3f, dropout_rng);
        const Tensor targets = Tensor::from_ints({5}, {3, -1, 0, 39, 7});  // one row ignored
        Var loss = ops::add(ops::sum_all(ops::mul(activated, activated)), ops::cross_entropy(logits, targets, -1, 0.1f));
        loss = ops::add(loss, ops::sum_all(ops::mul(summed, summed)));
        // The scores' gradients, which feed dQ and dK, from LNAS and DNAS (normalize_attention) and HNAS.
        const Var lnas_scores(random_tensor({2, 3, 5, 7}, 10), true), dnas_scores(random_tensor({2, 3, 5, 7}, 11), true);
        const Var hnas_scores(random_tensor({2, 3, 5, 7}, 12), true), theta(random_tensor({3}, 13));
        const Var upstream(random_tensor({2, 3, 5, 7}, 14));
        const ops::AttentionMask mask{};
        using ops::NormalizeAxis;
        for (const Var& weights : {ops::normalize_attention(lnas_scores, mask, {NormalizeAxis::keys}),
                                   ops::normalize_attention(dnas_scores, mask, {NormalizeAxis::queries, NormalizeAxis::keys}),
                                   ops::hybrid_attention(hnas_scores, theta, mask)}) {
            loss = ops::add(loss, ops::sum_all(ops::mul(weights, upstream)));
        }
        loss.backward();
        return std::array<Tensor, 9>{normalized.value(),  activated.value(),   dropped.value(),
                                     hidden.grad(),       logits.grad(),       branch.grad(),
                                     lnas_scores.grad(),  dnas_scores.grad(),  hnas_scores.grad()};
    };
    for (const Tensor& tensor : run(backend::MatmulPrecision::bf16)) EXPECT_TRUE(testing::holds_current_bf16_copy(tensor));
    for (const Tensor& tensor : run(backend::MatmulPrecision::f32)) EXPECT_FALSE(tensor.bf16_copy().second);
}

TEST(BackendMatmul, ReusesCachedPrimitives) {
    const Tensor a = random_tensor({9, 4}, 1), b = random_tensor({4, 11}, 2);
    Tensor c = Tensor::empty({9, 11});
    backend::matmul(a.data(), b.data(), c.data(), {1, 9, 11, 4});
    const int64_t after_first = backend::matmul_stats().primitives;
    for (int i = 0; i < 5; ++i) backend::matmul(a.data(), b.data(), c.data(), {1, 9, 11, 4});
    EXPECT_EQ(backend::matmul_stats().primitives, after_first);
    backend::matmul(a.data(), b.data(), c.data(), {1, 9, 11, 4}, {2.0f, nullptr, false});
    EXPECT_EQ(backend::matmul_stats().primitives, after_first + 1);  // a new alpha is a new primitive
}

// Past its capacity the cache forgets the least recently used shape (created again when it returns)
// and keeps the ones in use.
TEST(BackendMatmul, ForgetsTheLeastRecentlyUsedShapeBeyondItsCapacity) {
    const int64_t k = 3;
    const Tensor a = random_tensor({1, k}, 1);
    const Tensor b = random_tensor({k, static_cast<int64_t>(backend::kMatmulCacheCapacity) + 1}, 2);
    Tensor c = Tensor::empty({1, static_cast<int64_t>(backend::kMatmulCacheCapacity) + 1});
    auto run = [&](int64_t n) { backend::matmul(a.data(), b.data(), c.data(), {1, 1, n, k}, {1.0f, nullptr, false}); };
    const int64_t shapes = static_cast<int64_t>(backend::kMatmulCacheCapacity);
    for (int64_t n = 1; n <= shapes; ++n) run(n);  // (1 × k)·(k × n): a new shape each, filling the cache
    const int64_t created = backend::matmul_stats().primitives;
    run(1);  // the oldest, used again: now the most recent
    EXPECT_EQ(backend::matmul_stats().primitives, created);
    run(shapes + 1);  // one more shape: the least recently used (n = 2) goes
    EXPECT_EQ(backend::matmul_stats().primitives, created + 1);
    run(1);
    EXPECT_EQ(backend::matmul_stats().primitives, created + 1);
    run(2);
    EXPECT_EQ(backend::matmul_stats().primitives, created + 2);
}

TEST(BackendMatmul, CountsCallsAndFlops) {
    const Tensor a = random_tensor({2, 9, 4}, 1), b = random_tensor({2, 4, 11}, 2);
    Tensor c = Tensor::empty({2, 9, 11});
    const backend::MatmulStats before = backend::matmul_stats();
    for (int i = 0; i < 3; ++i) backend::matmul(a.data(), b.data(), c.data(), {2, 9, 11, 4});
    const backend::MatmulStats after = backend::matmul_stats();
    EXPECT_EQ(after.calls, before.calls + 3);
    EXPECT_DOUBLE_EQ(after.flops - before.flops, 3 * 2.0 * 2 * 9 * 11 * 4);
    EXPECT_GE(after.seconds, before.seconds);
    EXPECT_GE(after.creation_seconds, before.creation_seconds);
}

// The recorder sees exactly the products run while it lives, options included; the matmul-only bound
// replays them outside matmul() (not counted as calls) and takes time for each.
TEST(BackendMatmul, RecordsProductsAndReplaysThemAlone) {
    const Tensor a = random_tensor({2, 9, 4}, 1), b = random_tensor({4, 11}, 2), bias = random_tensor({11}, 3);
    Tensor c = Tensor::empty({2, 9, 11});
    backend::matmul(a.data(), b.data(), c.data(), {2, 9, 11, 4, false, false, true});  // before: not recorded
    std::vector<backend::MatmulCall> products;
    {
        backend::MatmulRecorder recorder;
        EXPECT_THROW(backend::MatmulRecorder second, Error);
        backend::matmul(a.data(), b.data(), c.data(), {2, 9, 11, 4, false, false, true}, {1.0f, bias.data(), false});
        const Tensor tall = random_tensor({18, 11}, 4);  // A stored (k, m), and B (k, n)
        backend::matmul(tall.data(), tall.data(), c.data(), {1, 11, 11, 18, true, false, false}, {0.5f, nullptr, true});
        products = recorder.calls();
    }
    backend::matmul(a.data(), b.data(), c.data(), {2, 9, 11, 4, false, false, true});  // after: not recorded
    ASSERT_EQ(products.size(), 2u);
    EXPECT_EQ(products[0].shape.batch, 2);
    EXPECT_TRUE(products[0].shape.shared_b);
    EXPECT_TRUE(products[0].bias);
    EXPECT_FALSE(products[0].accumulate);
    EXPECT_EQ(products[1].shape.m, 11);
    EXPECT_EQ(products[1].shape.k, 18);
    EXPECT_TRUE(products[1].shape.trans_a);
    EXPECT_TRUE(products[1].accumulate);
    EXPECT_FLOAT_EQ(products[1].alpha, 0.5f);
    const int64_t calls_before = backend::matmul_stats().calls;
    EXPECT_GT(backend::matmul_only_seconds(products, 3, 0), 0.0);
    EXPECT_GT(backend::matmul_only_seconds(products, 3, size_t{1} << 20), 0.0);
    EXPECT_EQ(backend::matmul_stats().calls, calls_before);
    EXPECT_EQ(backend::matmul_only_seconds({}, 3, 0), 0.0);
    EXPECT_THROW(backend::matmul_only_seconds(products, 0, 0), Error);
}

// Entry p's logical element (i, j) of an operand of `heads`-grouped (rows, cols) matrices, stored
// transposed or not, with its heads interleaved in the stored rows or split: index arithmetic.
float head_element(const Tensor& x, int64_t p, int64_t heads, int64_t rows, int64_t cols, bool transposed,
                   bool interleaved, int64_t i, int64_t j) {
    const int64_t stored_rows = transposed ? cols : rows, stored_cols = transposed ? rows : cols;
    const int64_t r = transposed ? j : i, c = transposed ? i : j;
    const int64_t at = interleaved ? (((p / heads) * stored_rows + r) * heads + p % heads) * stored_cols + c
                                   : (p * stored_rows + r) * stored_cols + c;
    return x.data()[at];
}

TEST(BackendMatmul, ReadsAndWritesHeadsInterleavedOrSplitInEveryLayout) {
    const int64_t heads = 3, batch = 2 * heads, m = 4, n = 5, k = 6;
    uint64_t seed = 100;
    for (int layout = 0; layout < 64; ++layout) {
        backend::MatmulShape s{batch, m, n, k, (layout & 1) != 0, (layout & 2) != 0, false};
        s.heads = heads;
        s.a_interleaved = (layout & 4) != 0;
        s.b_interleaved = (layout & 8) != 0;
        s.c_interleaved = (layout & 16) != 0;
        const bool accumulate = (layout & 32) != 0;
        const Tensor a = random_tensor({batch * m * k}, seed++), b = random_tensor({batch * k * n}, seed++);
        const Tensor c_before = random_tensor({batch * m * n}, seed++);
        Tensor c = c_before.clone();
        backend::matmul(a.data(), b.data(), c.data(), s, {0.75f, nullptr, accumulate});
        for (int64_t p = 0; p < batch; ++p) {
            for (int64_t i = 0; i < m; ++i) {
                for (int64_t j = 0; j < n; ++j) {
                    double expected = 0.0;
                    for (int64_t q = 0; q < k; ++q) {
                        expected += static_cast<double>(head_element(a, p, heads, m, k, s.trans_a, s.a_interleaved, i, q)) *
                                    head_element(b, p, heads, k, n, s.trans_b, s.b_interleaved, q, j);
                    }
                    expected *= 0.75;
                    if (accumulate) expected += head_element(c_before, p, heads, m, n, false, s.c_interleaved, i, j);
                    ASSERT_NEAR(head_element(c, p, heads, m, n, false, s.c_interleaved, i, j), expected, 1e-5)
                        << "layout " << layout << " entry " << p << " (" << i << ", " << j << ")";
                }
            }
        }
    }
}

TEST(BackendMatmul, RejectsHeadsThatDoNotDivideTheBatch) {
    const Tensor a = random_tensor({5, 4}, 1), b = random_tensor({5, 4}, 2);
    Tensor c = Tensor::empty({5, 4});
    backend::MatmulShape shape{5, 2, 2, 2};
    shape.heads = 2;
    EXPECT_THROW(backend::matmul(a.data(), b.data(), c.data(), shape), Error);
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

// Each sum is its column's total over every row (a last block shorter than kRows included), written
// over or added to the output; totalled by the threads of the region that filled the blocks (as the ops
// call it) or by one thread outside any region, the same bits. 135 columns: three stretches, one partial.
TEST(BackendKernels, RowBlockSumsAreColumnTotals) {
    const int64_t rows = 2 * kernels::RowBlockSums::kRows + 5, columns = 135;
    const Tensor values = random_tensor({rows, columns}, 31);
    kernels::RowBlockSums sums(rows, columns, 2);
    std::vector<float> totals(columns, 0.5f), doubled(columns, 0.5f);
    const kernels::RowBlockSums::Total wanted[] = {{totals.data(), true}, {doubled.data(), false}};
#pragma omp parallel num_threads(2)
    {
#pragma omp for schedule(static)
        for (int64_t block = 0; block < sums.blocks(); ++block) {
            sums.start_block(block);
            for (int64_t r = sums.first_row(block); r < sums.end_row(block); ++r)
                for (int64_t j = 0; j < columns; ++j) {
                    sums.block(block, 0)[j] += values.data()[r * columns + j];
                    sums.block(block, 1)[j] += 2.0f;
                }
        }
        sums.total(wanted);
    }
    ASSERT_EQ(sums.blocks(), 3);
    std::vector<float> serial(columns, 0.5f);
    const kernels::RowBlockSums::Total only_first[] = {{serial.data(), true}};
    sums.total(only_first);
    for (int64_t j = 0; j < columns; ++j) {
        double expected = 0.5;
        for (int64_t r = 0; r < rows; ++r) expected += values.data()[r * columns + j];
        const size_t at = static_cast<size_t>(j);
        EXPECT_NEAR(totals[at], expected, 1e-5) << "column " << j;
        EXPECT_EQ(serial[at], totals[at]) << "column " << j;
        EXPECT_EQ(doubled[at], 2.0f * static_cast<float>(rows)) << "column " << j;
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
    double worst_exp = 0, worst_erf = 0, worst_gaussian = 0;
    for (int i = -200000; i <= 200000; ++i) {
        const float x = static_cast<float>(i) * 4.3e-4f;  // -86 .. 86
        worst_exp = std::max(worst_exp, std::abs(kernels::fast_exp(x) / std::exp(static_cast<double>(x)) - 1.0));
        const float z = static_cast<float>(i) * 3e-5f;  // -6 .. 6
        const kernels::ErfWithGaussian e = kernels::fast_erf_with_gaussian(z);
        worst_erf = std::max(worst_erf, std::abs(e.erf - std::erf(static_cast<double>(z))));
        worst_gaussian = std::max(worst_gaussian, std::abs(e.gaussian - std::exp(-static_cast<double>(z) * z)));
    }
    EXPECT_LT(worst_exp, 5e-7) << "relative error of fast_exp";
    EXPECT_LT(worst_erf, 1e-6) << "absolute error of fast_erf";
    EXPECT_LT(worst_gaussian, 1e-6) << "absolute error of fast_erf_with_gaussian's e^(-x^2)";
    EXPECT_EQ(kernels::fast_exp(-std::numeric_limits<float>::infinity()), 0.0f);
    EXPECT_EQ(kernels::fast_erf(0.0f), 0.0f);
}

// The double exp of beam search's log-softmax against libm from the underflow to the overflow bound.
TEST(BackendKernels, ExpDoubleMatchesLibm) {
    double worst = 0;
    for (int i = -708000; i <= 709000; ++i) {
        const double x = static_cast<double>(i) * 1.0007e-3;
        if (x < -708.0 || x > 709.0) continue;
        worst = std::max(worst, std::abs(kernels::exp_double(x) / std::exp(x) - 1.0));
    }
    EXPECT_LT(worst, 5e-16) << "relative error of exp_double (2 ulp is 4.4e-16)";
    EXPECT_EQ(kernels::exp_double(0.0), 1.0);
    EXPECT_EQ(kernels::exp_double(-800.0), 0.0);
    EXPECT_EQ(kernels::exp_double(-std::numeric_limits<double>::infinity()), 0.0);
}

// The value of a bf16 bit pattern from the format's definition, in double; the all-ones exponent with a
// zero mantissa counts as 2¹²⁸, where IEEE rounding places the overflow threshold.
double bf16_pattern_value(uint16_t pattern) {
    const int exponent = (pattern >> 7) & 0xFF, mantissa = pattern & 0x7F;
    const double magnitude = exponent == 0 ? std::ldexp(mantissa / 128.0, -126) : std::ldexp(1.0 + mantissa / 128.0, exponent - 127);
    return (pattern & 0x8000) ? -magnitude : magnitude;
}

// Round to nearest, ties to even, from the definition: of the two bf16 patterns around a finite x
// (its truncation and the next one away from zero), the nearer, or the one with an even last bit.
uint16_t nearest_bf16(float x) {
    const auto truncated = static_cast<uint16_t>(std::bit_cast<uint32_t>(x) >> 16);
    const auto next = static_cast<uint16_t>(truncated + 1);
    const double below = std::abs(x - bf16_pattern_value(truncated)), above = std::abs(bf16_pattern_value(next) - x);
    if (below != above) return below < above ? truncated : next;
    return (truncated & 1) ? next : truncated;
}

// The vectorized maximum: the largest value wherever it sits (each position of a length that leaves a
// tail after the vector lanes), −∞ for no values or only −∞, and +∞ when present.
TEST(BackendKernels, MaxValueFindsTheLargestAnywhere) {
    constexpr float kInf = std::numeric_limits<float>::infinity();
    EXPECT_EQ(kernels::max_value(nullptr, 0), -kInf);
    const std::vector<float> minus_infinities(37, -kInf);
    EXPECT_EQ(kernels::max_value(minus_infinities.data(), 37), -kInf);
    for (int64_t length : {1, 16, 37, 8000}) {
        for (int64_t at = 0; at < length; at += std::max<int64_t>(1, length / 50)) {
            std::vector<float> values(static_cast<size_t>(length));
            for (int64_t i = 0; i < length; ++i) values[static_cast<size_t>(i)] = -1.0f - static_cast<float>(i % 7);
            values[static_cast<size_t>(at)] = -0.5f;
            ASSERT_EQ(kernels::max_value(values.data(), length), -0.5f) << "length " << length << ", largest at " << at;
            values[static_cast<size_t>(length - 1 - at)] = kInf;
            ASSERT_EQ(kernels::max_value(values.data(), length), kInf) << "length " << length;
        }
    }
}

TEST(BackendKernels, Bf16ConversionRoundsToNearestEven) {
    auto round_bits = [](uint32_t bits) { return kernels::round_to_bf16(std::bit_cast<float>(bits)); };
    EXPECT_EQ(kernels::round_to_bf16(1.0f), 0x3F80);
    EXPECT_EQ(round_bits(0x3F808000), 0x3F80);  // 1 + 2⁻⁸: a tie, kept even (down)
    EXPECT_EQ(round_bits(0x3F818000), 0x3F82);  // 1 + 3·2⁻⁸: a tie, made even (up)
    EXPECT_EQ(round_bits(0xBF818000), 0xBF82);  // the same tie, negative
    EXPECT_EQ(round_bits(0x3F808001), 0x3F81);  // just above the tie
    EXPECT_EQ(round_bits(0x3F807FFF), 0x3F80);  // just below it
    EXPECT_EQ(round_bits(0x3FFFFFFF), 0x4000);  // the carry moves into the exponent
    EXPECT_EQ(kernels::round_to_bf16(std::numeric_limits<float>::max()), 0x7F80);  // overflows to inf
    EXPECT_EQ(kernels::round_to_bf16(std::numeric_limits<float>::infinity()), 0x7F80);
    EXPECT_EQ(kernels::round_to_bf16(-std::numeric_limits<float>::infinity()), 0xFF80);
    EXPECT_EQ(round_bits(0x00008000), 0x0000);  // subnormal tie, kept even
    EXPECT_EQ(round_bits(0x00018000), 0x0002);
    EXPECT_EQ(round_bits(0x80000000), 0x8000);  // −0 keeps its sign
    // NaNs stay NaN of their sign, quiet; plain truncation-with-rounding would turn these into inf or −0.
    for (uint32_t nan : {0x7FC00000u, 0x7F800001u, 0x7FFFFFFFu, 0xFF800001u, 0xFFFFFFFFu}) {
        const uint16_t result = round_bits(nan);
        EXPECT_TRUE(std::isnan(kernels::bf16_to_float(result))) << std::hex << nan;
        EXPECT_EQ(result & 0x8000, (nan >> 16) & 0x8000) << std::hex << nan;
        EXPECT_TRUE(result & 0x40) << "quiet NaN expected from " << std::hex << nan;
    }
    // Random finite patterns of every exponent (subnormals among them), through the (parallel, and
    // where the CPU has one, hardware) array conversion, with a tail shorter than a vector.
    std::mt19937 generator(5);
    std::vector<float> values;
    while (values.size() < 200003) {
        const float x = std::bit_cast<float>(static_cast<uint32_t>(generator()));
        if (std::isfinite(x)) values.push_back(x);
    }
    std::vector<uint16_t> converted(values.size());
    kernels::convert_to_bf16(values.data(), converted.data(), static_cast<int64_t>(values.size()));
    for (size_t i = 0; i < values.size(); ++i) {
        ASSERT_EQ(converted[i], nearest_bf16(values[i])) << std::hexfloat << values[i];
    }
    // Every special value of the scalar rounding, in one array: the array conversion gives the same bits.
    std::vector<float> specials;
    for (uint32_t bits : {0x3F808000u, 0x3F818000u, 0xBF818000u, 0x3F808001u, 0x3F807FFFu, 0x3FFFFFFFu, 0x7F7FFFFFu,
                          0x7F800000u, 0xFF800000u, 0x00008000u, 0x00018000u, 0x80000000u, 0x7FC00000u, 0x7F800001u,
                          0x7FFFFFFFu, 0xFF800001u, 0xFFFFFFFFu, 0x00000001u, 0x807FFFFFu}) {
        specials.push_back(std::bit_cast<float>(bits));
    }
    for (size_t i = 0; i < 64; ++i) specials.push_back(std::bit_cast<float>(static_cast<uint32_t>(0x7F800001u + i)));
    std::vector<uint16_t> special_bits(specials.size());
    kernels::convert_to_bf16(specials.data(), special_bits.data(), static_cast<int64_t>(specials.size()));
    for (size_t i = 0; i < specials.size(); ++i) {
        EXPECT_EQ(special_bits[i], kernels::round_to_bf16(specials[i])) << std::hex << std::bit_cast<uint32_t>(specials[i]);
    }
}

}  // namespace
}  // namespace hnas
