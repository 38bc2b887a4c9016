// Tensors, shapes, the random number generator, the one spelling of non-finite numbers in messages and
// the enums' name tables.
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <bit>
#include <cmath>
#include <limits>
#include <sstream>
#include <utility>

#include "base/enum_names.h"
#include "base/number_format.h"
#include "base/system_memory.h"
#include "base/text_io.h"
#include "test_support.h"

namespace hnas {
namespace {

// ---- enum name tables ---------------------------------------------------------------------------------

enum class Tri { one, two, three };
constexpr EnumName<Tri> kMissingLast[]{{Tri::one, "one"}, {Tri::two, "two"}};
constexpr EnumName<Tri> kOutOfOrder[]{{Tri::one, "one"}, {Tri::three, "three"}, {Tri::two, "two"}};
constexpr EnumName<Tri> kComplete[]{{Tri::one, "one"}, {Tri::two, "two"}, {Tri::three, "three"}};
// The compile-time check behind names_of<E>() catches a table that lacks an enumerator or lists them
// out of order.
static_assert(!detail::covers_enum(kMissingLast));
static_assert(!detail::covers_enum(kOutOfOrder));
static_assert(detail::covers_enum(kComplete));

TEST(EnumNames, ParseAndPrintThroughOneTable) {
    EXPECT_STREQ(name_of(DamagedLines::skip), "skip");
    EXPECT_EQ(parse_enum<DamagedLines>("reject", "data.damaged_lines"), DamagedLines::reject);
    EXPECT_EQ(testing::error_of([] { parse_enum<DamagedLines>("ignore", "data.damaged_lines"); }),
              "data.damaged_lines: unknown value \"ignore\"; expected \"reject\" or \"skip\"");
    EXPECT_EQ(name_list<DamagedLines>(), (std::vector<std::string>{"reject", "skip"}));
}

TEST(Tensor, ReshapeIsAViewAndInfersOneAxis) {
    Tensor t = Tensor::from_floats({2, 3}, {1, 2, 3, 4, 5, 6});
    Tensor view = t.reshape({3, -1});
    EXPECT_EQ(view.shape(), (Shape{3, 2}));
    EXPECT_TRUE(view.shares_storage(t));
    view.data()[0] = 42.0f;
    EXPECT_EQ(t.data()[0], 42.0f);
    EXPECT_THROW(t.reshape({4, -1}), Error);
    EXPECT_THROW(t.reshape({-1, -1}), Error);
}

// The bf16 copy a tensor keeps for the matmul backend: current once filled, for every view of the
// storage; stale after any non-const data() call, never after reads; its block counted as live memory.
TEST(Tensor, Bf16CopyStaysCurrentUntilTheValuesAreWritten) {
    Tensor t = Tensor::from_floats({2, 3}, {1, 2, 3, 4, 5, 6});
    const int64_t live = tensor_memory().live;
    const auto [block, current] = t.bf16_copy();
    EXPECT_FALSE(current);
    EXPECT_EQ(tensor_memory().live, live + 64);
    EXPECT_EQ(reinterpret_cast<uintptr_t>(block) % 64, 0u);
    const Tensor view = t.reshape({3, 2});
    EXPECT_EQ(view.bf16_copy(), std::make_pair(block, true));
    EXPECT_EQ(std::as_const(t).data()[0], 1.0f);
    EXPECT_EQ(t.bf16_copy(), std::make_pair(block, true));
    t.data()[0] = 7.0f;
    EXPECT_EQ(view.bf16_copy(), std::make_pair(block, false));
    EXPECT_EQ(t.bf16_copy(), std::make_pair(block, true));
    t.reshape({6}).fill(0.0f);
    EXPECT_EQ(t.bf16_copy(), std::make_pair(block, false));
    EXPECT_FALSE(t.clone().bf16_copy().second);
}

// A bf16-only tensor holds just its bf16 copy until its values are read; then they are made from the
// copy, exactly, once; reading before the copy is written is an error.
TEST(Tensor, Bf16OnlyValuesAreMadeFromTheCopyWhenRead) {
    const int64_t before = tensor_memory().live;
    Tensor unwritten = Tensor::bf16_only({2, 3});
    EXPECT_THROW(unwritten.data(), Error);
    Tensor t = Tensor::bf16_only({2, 3});
    const auto [copy, current] = t.bf16_copy();
    EXPECT_FALSE(current);
    const std::vector<float> values{1.0f, -2.5f, 0.0f, 3.140625f, -0.0078125f, 65536.0f};  // exact in bf16
    for (size_t i = 0; i < values.size(); ++i) copy[i] = static_cast<uint16_t>(std::bit_cast<uint32_t>(values[i]) >> 16);
    const int64_t with_copy = tensor_memory().live;
    EXPECT_EQ(with_copy - before, 64);  // the one copy (a 64-byte block) and nothing else
    const Tensor view = t.reshape({6});
    EXPECT_EQ(view.to_floats(), values);
    EXPECT_EQ(tensor_memory().live - with_copy, 64);  // the f32 values, made once for both views
    EXPECT_EQ(t.to_floats(), values);
    EXPECT_TRUE(t.bf16_copy().second);
    t.data()[0] = 7.0f;
    EXPECT_FALSE(t.bf16_copy().second);  // written: the copy is stale
}

TEST(Tensor, StorageIsAligned) {
    for (int64_t n : {1, 3, 17, 1000}) {
        Tensor t = Tensor::empty({n});
        EXPECT_EQ(reinterpret_cast<uintptr_t>(t.data()) % 64, 0u);
    }
}

// The accounting over a scripted sequence of shapes, as batches of varying length allocate them: live
// bytes are the blocks' (64-byte multiples), and the peak is the most held at once, reset on request.
TEST(TensorPool, AccountsLiveBytesOverVaryingShapes) {
    reset_tensor_memory_peak();
    const TensorMemory start = tensor_memory();
    EXPECT_EQ(start.peak_live, start.live);
    int64_t most = 0;
    for (int64_t length : {40, 128, 16, 96, 64}) {  // one step per length: its activations, then freed
        std::vector<Tensor> activations;
        for (int layer = 0; layer < 4; ++layer) activations.push_back(Tensor::empty({8, length, 32}));
        const int64_t bytes = 4 * 8 * length * 32 * 4;
        EXPECT_EQ(tensor_memory().live - start.live, bytes) << "length " << length;
        most = std::max(most, bytes);
    }
    EXPECT_EQ(tensor_memory().live, start.live);
    EXPECT_EQ(tensor_memory().peak_live, start.live + most);
    {
        const Tensor odd = Tensor::empty({1001});  // 4,004 bytes in a block of 4,032
        EXPECT_EQ(tensor_memory().live - start.live, 4032);
    }
    reset_tensor_memory_peak();
    EXPECT_EQ(tensor_memory().peak_live, start.live);
}

// Returned blocks are reused: batches of varying length, one step after another, are cut from the
// memory earlier steps freed. A second pass over the same lengths maps nothing new and faults no page in
// (the first pass touched every page it uses), and the pool holds less than twice the largest step.
// Tensors of 40 MiB: above 32 MiB glibc would map each block anew and unmap it when freed.
TEST(TensorPool, FreedMemoryServesLaterShapesWithoutFreshPages) {
#ifdef HNAS_SANITIZE
    GTEST_SKIP() << "sanitizer builds take every block from malloc, for AddressSanitizer to see reuse";
#else
    auto step = [](int64_t length) {
        std::vector<Tensor> activations;
        for (int layer = 0; layer < 2; ++layer) {
            activations.push_back(Tensor::empty({length, 65536}));  // 160 rows: 40 MiB
            activations.back().fill(1.0f);
        }
    };
    auto pass = [&] {
        for (int64_t length : {160, 150, 100, 160, 130}) step(length);
    };
    const int64_t reserved_before = tensor_memory().reserved;
    pass();
    const int64_t faults = process_memory().minor_faults, reserved = tensor_memory().reserved;
    pass();
    const int64_t largest_step = 2 * 160 * 65536 * 4, pages = largest_step / 4096;
    EXPECT_LT(process_memory().minor_faults - faults, pages / 20) << "the second pass faulted fresh pages in";
    EXPECT_EQ(tensor_memory().reserved, reserved) << "the second pass mapped new segments";
    EXPECT_LT(reserved - reserved_before, 2 * largest_step);
#endif
}

// Under an address-space limit (setrlimit, in a child process), a tensor too large to allocate is an
// AllocationError naming the bytes it asked for, not a crash.
TEST(TensorPool, AllocationFailureNamesTheSize) {
#ifdef HNAS_SANITIZE
    GTEST_SKIP() << "AddressSanitizer reserves more address space than any limit this test could set";
#else
    const pid_t child = fork();
    ASSERT_GE(child, 0);
    if (child == 0) {
        const rlimit limit{size_t{2} << 30, size_t{2} << 30};  // 2 GiB of address space
        if (setrlimit(RLIMIT_AS, &limit) != 0) _exit(3);
        try {
            const Tensor huge = Tensor::empty({int64_t{1} << 30});  // 4 GiB
            _exit(1);
        } catch (const AllocationError& e) {
            const std::string message = e.what();
            _exit(e.bytes >= (int64_t{4} << 30) && message.find("tensor: cannot allocate ") == 0 &&
                          message.find(" bytes with ") != std::string::npos
                      ? 0
                      : 2);
        }
    }
    int status = 0;
    waitpid(child, &status, 0);
    ASSERT_TRUE(WIFEXITED(status));
    EXPECT_EQ(WEXITSTATUS(status), 0) << "1: allocated anyway; 2: the error did not name the size; 3: setrlimit failed";
#endif
}

TEST(Tensor, DtypeIsChecked) {
    Tensor ids = Tensor::from_ints({2}, {1, 2});
    EXPECT_THROW(ids.data(), Error);
    Tensor values = Tensor::zeros({2});
    EXPECT_THROW(values.ints(), Error);
    EXPECT_THROW(Tensor::from_floats({3}, {1.0f}), Error);
    Tensor mask = Tensor::zeros({3, 5}, DType::u8);
    try {
        mask.data();
        FAIL() << "expected an error";
    } catch (const Error& e) {
        EXPECT_NE(std::string(e.what()).find("asked for f32 data, but the tensor is u8"), std::string::npos) << e.what();
    }
    EXPECT_THROW(values.bytes(), Error);
}

// A byte tensor holds one byte per element, and its copies copy bytes.
TEST(Tensor, BytesCopyAsBytes) {
    Tensor mask = Tensor::zeros({3, 5}, DType::u8);
    for (int64_t i = 0; i < mask.numel(); ++i) ASSERT_EQ(mask.bytes()[i], 0);
    for (int64_t i = 0; i < mask.numel(); ++i) mask.bytes()[i] = static_cast<uint8_t>(10 + i);
    const Tensor copy = mask.clone();
    const Tensor rows = mask.take_rows({2, 0});
    for (int64_t i = 0; i < mask.numel(); ++i) EXPECT_EQ(copy.bytes()[i], 10 + i);
    for (int64_t j = 0; j < 5; ++j) {
        EXPECT_EQ(rows.bytes()[j], 20 + j);
        EXPECT_EQ(rows.bytes()[5 + j], 10 + j);
    }
    const int64_t live = tensor_memory().live;
    const Tensor large = Tensor::empty({1 << 20}, DType::u8);
    EXPECT_EQ(tensor_memory().live - live, 1 << 20);
}

TEST(Shape, BroadcastErrorsNameTheOpAndShapes) {
    EXPECT_EQ(broadcast_shapes({2, 1, 4}, {3, 1}, "add"), (Shape{2, 3, 4}));
    try {
        broadcast_shapes({2, 3}, {4}, "mul");
        FAIL() << "expected an error";
    } catch (const Error& e) {
        EXPECT_NE(std::string(e.what()).find("mul: shapes (2, 3) and (4)"), std::string::npos) << e.what();
    }
}

// Every count a tensor is allocated from passes shape_numel, which refuses negative dimensions and
// counts beyond kMaxTensorElements without ever computing a wrapped product.
TEST(Shape, ElementCountsAreCheckedWithoutOverflow) {
    EXPECT_EQ(shape_numel({3, 0, int64_t{1} << 62}), 0);
    EXPECT_EQ(shape_numel({int64_t{1} << 20, int64_t{1} << 16}), kMaxTensorElements);
    // 2^62 · 4 wraps to 0 in 64 bits: the count a crafted safetensors shape once slipped through with.
    EXPECT_CONTAINS(testing::error_of([] { (void)shape_numel({int64_t{1} << 62, 4}, "weights.st: tensor x"); }),
                    "weights.st: tensor x: shape (4611686018427387904, 4) has more than 68719476736 elements");
    EXPECT_CONTAINS(testing::error_of([] { (void)Tensor::empty({int64_t{1} << 33, int64_t{1} << 33, 4}); }),
                    "tensor: shape (8589934592, 8589934592, 4) has more than 68719476736 elements");
    EXPECT_CONTAINS(testing::error_of([] { (void)Tensor::zeros({4, -2}); }), "tensor: negative dimension in shape (4, -2)");
    EXPECT_CONTAINS(testing::error_of([] { (void)Tensor::bf16_only({-1}); }), "tensor: negative dimension in shape (-1)");
    EXPECT_CONTAINS(testing::error_of([] { (void)Tensor::zeros({6}).reshape({-1, int64_t{1} << 40, int64_t{1} << 40}); }),
                    "reshape: shape (1, 1099511627776, 1099511627776) has more than");
}

TEST(Shape, OpErrorsNameTheOpAndShapes) {
    Var a(Tensor::zeros({2, 3})), b(Tensor::zeros({4, 5}));
    try {
        ops::matmul(a, b);
        FAIL() << "expected an error";
    } catch (const Error& e) {
        EXPECT_NE(std::string(e.what()).find("matmul: inner dimensions differ: (2, 3)"), std::string::npos) << e.what();
        EXPECT_NE(std::string(e.what()).find("(4, 5)"), std::string::npos) << e.what();
    }
}

// A NaN with its sign bit set, as some CPUs and code paths produce where others produce a positive one.
const double kNegativeNan = std::copysign(std::numeric_limits<double>::quiet_NaN(), -1.0);
const double kInf = std::numeric_limits<double>::infinity();

std::string streamed(double value) {
    std::ostringstream out;
    out << portable(value);
    return out.str();
}

TEST(NumberFormat, NonFiniteValuesHaveOneSpelling) {
    ASSERT_TRUE(std::signbit(kNegativeNan));
    for (const double nan : {std::numeric_limits<double>::quiet_NaN(), kNegativeNan}) {
        EXPECT_EQ(non_finite_spelling(nan), "nan");
        EXPECT_EQ(streamed(nan), "nan");
        EXPECT_EQ(fmt::format("{}", portable(nan)), "nan");
        EXPECT_EQ(fmt::format("{:.4f}", portable(nan)), "nan");
        EXPECT_EQ(fmt::format("{:>6.2e}", portable(nan)), "   nan");
        EXPECT_EQ(fmt::format("{:.3f}", portable(static_cast<float>(nan))), "nan");
    }
    EXPECT_EQ(non_finite_spelling(kInf), "inf");
    EXPECT_EQ(non_finite_spelling(-kInf), "-inf");
    EXPECT_EQ(streamed(kInf), "inf");
    EXPECT_EQ(streamed(-kInf), "-inf");
    EXPECT_EQ(fmt::format("{:.4f}", portable(kInf)), "inf");
    EXPECT_EQ(fmt::format("{:.4f}", portable(-kInf)), "-inf");
}

TEST(NumberFormat, FiniteValuesKeepTheirFormat) {
    EXPECT_EQ(non_finite_spelling(1.5), "");
    EXPECT_EQ(streamed(0.1), "0.1");
    EXPECT_EQ(streamed(-2.5e-7), "-2.5e-07");
    EXPECT_EQ(fmt::format("{:.4f}", portable(1.23456)), "1.2346");
    EXPECT_EQ(fmt::format("{:>8.2f}", portable(-3.14159)), "   -3.14");
    EXPECT_EQ(fmt::format("{:.3e}", portable(0.00123)), "1.230e-03");
}

// Every HNAS_CHECK message spells its floating-point arguments portably, floats and doubles alike.
TEST(NumberFormat, CheckMessagesSpellNonFiniteValuesPortably) {
    const float negative_nan = static_cast<float>(kNegativeNan);
    ASSERT_TRUE(std::signbit(negative_nan));
    EXPECT_EQ(testing::error_of([&] { HNAS_CHECK(std::isfinite(negative_nan), "step 3: the loss is ", negative_nan); }),
              "step 3: the loss is nan");
    EXPECT_EQ(testing::error_of([] { HNAS_CHECK(false, "norm ", kNegativeNan, ", bound ", -kInf, " to ", kInf); }),
              "norm nan, bound -inf to inf");
    EXPECT_EQ(testing::error_of([] { HNAS_CHECK(false, "rate ", 0.5f, " of ", 3, " steps, ", 1e-3); }),
              "rate 0.5 of 3 steps, 0.001");
}

// JSON output has no NaN or infinity (strict JSON): nlohmann::json writes them as null, the
// documented spelling of a non-finite number in metrics.jsonl, reports and checkpoint headers.
TEST(NumberFormat, JsonHoldsNonFiniteNumbersAsNull) {
    const nlohmann::json record = {{"loss", kNegativeNan}, {"grad_norm", kInf}, {"rate", -kInf}, {"lr", 0.5}};
    EXPECT_EQ(record.dump(), R"({"grad_norm":null,"loss":null,"lr":0.5,"rate":null})");
}

TEST(Rng, StreamsAreReproducibleAndDistinct) {
    Rng a(42, 1), b(42, 1), c(42, 2);
    bool any_difference = false;
    for (int i = 0; i < 100; ++i) {
        const uint64_t x = a.next_u64();
        EXPECT_EQ(x, b.next_u64());
        any_difference |= x != c.next_u64();
    }
    EXPECT_TRUE(any_difference);
}

TEST(Rng, StateRestoresTheSequence) {
    Rng rng(7);
    for (int i = 0; i < 10; ++i) rng.next_u64();
    const Rng::State saved = rng.state();
    const float first = rng.normal();
    rng.uniform();
    rng.set_state(saved);
    EXPECT_EQ(rng.normal(), first);
}

TEST(Rng, MomentsAreRight) {
    Rng rng(3);
    double sum = 0.0, squares = 0.0, uniform_sum = 0.0;
    const int n = 200000;
    for (int i = 0; i < n; ++i) {
        const double x = rng.normal();
        sum += x;
        squares += x * x;
        uniform_sum += rng.uniform();
    }
    EXPECT_NEAR(sum / n, 0.0, 0.01);
    EXPECT_NEAR(squares / n, 1.0, 0.01);
    EXPECT_NEAR(uniform_sum / n, 0.5, 0.005);
    for (int i = 0; i < 1000; ++i) EXPECT_LT(rng.below(7), 7u);
}

TEST(Dropout, KeepsTheExpectedFractionAndScales) {
    Rng rng(11);
    Var x(Tensor::full({100000}, 1.0f));
    Tensor y = ops::dropout(x, 0.25f, rng).value();
    int64_t kept = 0;
    for (int64_t i = 0; i < y.numel(); ++i) {
        if (y.data()[i] != 0.0f) {
            ++kept;
            ASSERT_FLOAT_EQ(y.data()[i], 1.0f / 0.75f);
        }
    }
    EXPECT_NEAR(static_cast<double>(kept) / y.numel(), 0.75, 0.01);
}

// The fused residual sum against its definition, add(residual, dropout(branch)), from the same RNG
// state, on enough values for the parallel loop: the same mask, the sums equal up to the fused
// multiply-add's single rounding, the gradients equal bit for bit.
TEST(Dropout, FusedResidualSumMatchesDropoutThenAdd) {
    const Shape shape{5, 64, 80};
    Var residual_f(testing::random_tensor(shape, 1), true), branch_f(testing::random_tensor(shape, 2), true);
    Var residual_c(residual_f.value().clone(), true), branch_c(branch_f.value().clone(), true);
    const Var weights(testing::random_tensor(shape, 3));
    Rng fused_rng(7), composed_rng(7);
    const Var fused = ops::dropout_add(residual_f, branch_f, 0.3f, fused_rng);
    const Var composed = ops::add(residual_c, ops::dropout(branch_c, 0.3f, composed_rng));
    EXPECT_EQ(fused_rng.state(), composed_rng.state());
    const float *f = fused.value().data(), *c = composed.value().data(), *r = residual_f.value().data();
    int64_t dropped = 0;
    for (int64_t i = 0; i < fused.numel(); ++i) {
        ASSERT_NEAR(f[i], c[i], 1e-6f * (1.0f + std::abs(c[i]))) << i;
        if (c[i] == r[i]) {
            ASSERT_EQ(f[i], r[i]) << i;  // a dropped element is the residual exactly
            ++dropped;
        }
    }
    EXPECT_NEAR(static_cast<double>(dropped) / fused.numel(), 0.3, 0.01);
    Var fused_loss = ops::sum_all(ops::mul(fused, weights)), composed_loss = ops::sum_all(ops::mul(composed, weights));
    fused_loss.backward();
    composed_loss.backward();
    EXPECT_TRUE(testing::same_tensor(residual_f.grad(), residual_c.grad()));
    EXPECT_TRUE(testing::same_tensor(branch_f.grad(), branch_c.grad()));
    EXPECT_THROW(ops::dropout_add(residual_f, Var(Tensor::zeros({5, 64})), 0.3f, fused_rng), Error);
}

}  // namespace
}  // namespace hnas
