// Data-parallel training under mpirun, on this machine over loopback TCP: 2 ranks give the parameters
// of the single process at equal global batch (within kParameterTolerance); a run resumes on another
// number of ranks; a rank killed with SIGKILL, or stopped (hung) with SIGSTOP, ends the whole job with a
// message naming it and leaves a loadable last checkpoint. Without MPI only the sharding of batches
// between ranks and the overlap of the gradient sums with the backward pass are tested.
//
// Timing: the suite must pass on a loaded 2-core machine running another test beside it. The runs that
// do not test failures get a collective timeout no healthy operation comes near; the failure tests a
// short one, since the hang under test must end the job, yet long beside what a healthy rank waits for
// another here: a step or a checkpoint write of the tiny model, under 0.1 s with both cores busy. Every
// wait is for an event (a checkpoint, the job's end) up to a generous deadline, and no test asserts
// how long anything took.
//
// The runs use configs/gigaword_tiny.json with overrides: a tokenizer trained once for the suite,
// 16 sentences per global batch, one OpenMP thread per process, and dropout 0 — a rank draws the
// dropout masks of its slice of the batch, which cannot equal the masks the single process draws for
// those rows (docs/distributed.md), so only without dropout are the two runs the same computation.
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "backend/kernels.h"
#include "config/experiment_config.h"
#include "data/batch.h"
#include "data/tokenizer.h"
#include "distributed/gradient_reducer.h"
#include "io/checkpoint.h"
#include "test_support.h"

namespace hnas {
namespace {

namespace fs = std::filesystem;
using config::Json;

// The shards of a batch are disjoint, cover it, and differ in size by at most one row.
TEST(Sharding, ShardsPartitionTheRows) {
    for (int64_t rows : {1, 2, 7, 16, 33}) {
        for (int ranks : {1, 2, 3, 4}) {
            int64_t next = 0;
            for (int rank = 0; rank < ranks; ++rank) {
                const auto [first, last] = data::shard_rows(rows, rank, ranks);
                EXPECT_EQ(first, next);
                EXPECT_LE(last - first, rows / ranks + 1);
                EXPECT_GE(last - first, rows / ranks);
                next = last;
            }
            EXPECT_EQ(next, rows);
        }
    }
}

// A masked-LM slice keeps its rows' masked positions, renumbered, with their labels.
TEST(Sharding, MlmSliceRenumbersMaskedPositions) {
    data::MlmBatch batch;
    batch.input_ids = Tensor::from_ints({3, 4}, {4, 10, 6, 5, 4, 6, 11, 5, 4, 12, 6, 5});
    batch.segment_ids = Tensor::zeros({3, 4}, DType::i32);
    batch.valid = Tensor::from_floats({3, 4}, {1, 1, 1, 1, 1, 1, 1, 0, 1, 1, 1, 1});
    batch.sentence_order = Tensor::from_ints({3}, {0, 1, 0});
    batch.masked_positions = Tensor::from_ints({3}, {2, 5, 10});
    batch.masked_labels = Tensor::from_ints({3}, {20, 21, 22});
    batch.tokens = 11;
    const data::MlmBatch slice = data::slice_rows(batch, 1, 3);
    ASSERT_EQ(slice.input_ids.shape(), (Shape{2, 4}));
    EXPECT_EQ(slice.input_ids.ints()[0], 4);
    EXPECT_EQ(slice.input_ids.ints()[2], 11);
    EXPECT_EQ(slice.sentence_order.ints()[0], 1);
    ASSERT_EQ(slice.masked_positions.numel(), 2);
    EXPECT_EQ(slice.masked_positions.ints()[0], 1);  // row 1, column 1 → row 0 of the slice
    EXPECT_EQ(slice.masked_positions.ints()[1], 6);  // row 2, column 2 → row 1 of the slice
    EXPECT_EQ(slice.masked_labels.ints()[0], 21);
    EXPECT_EQ(slice.masked_labels.ints()[1], 22);
    EXPECT_EQ(slice.tokens, 7);
}

// Two ranks that hold the same gradients, as a Communicator: a sum doubles a buffer when wait_sums
// completes it. Records when each sum started: during the backward pass or after it.
class TwoEqualRanks final : public distributed::Communicator {
public:
    int rank() const override { return 0; }
    int size() const override { return 2; }
    int local_size() const override { return 2; }
    void sum(std::span<double> values, const std::string&) override {
        for (double& value : values) value *= 2.0;
    }
    void broadcast(std::string&, const std::string&) override {}
    [[noreturn]] void abort(const std::string& message) override { throw Error(message); }

    void open_sums(const std::string&) override {
        started_.clear();
        started_bf16_.clear();
    }
    void start_sum(std::span<float> buffer) override {
        started_.push_back(buffer);
        count_start();
    }
    void start_sum(std::span<uint16_t> bf16_buffer) override {
        started_bf16_.push_back(bf16_buffer);
        count_start();
    }
    void progress() override { ++progress_calls; }
    void wait_sums() override {
        for (std::span<float> buffer : started_) {
            for (float& value : buffer) value *= 2.0f;
        }
        for (std::span<uint16_t> buffer : started_bf16_) distributed::add_bf16(buffer.data(), buffer.data(), std::ssize(buffer));
    }

    bool in_backward = false;
    int started_in_backward = 0, started_after_backward = 0, progress_calls = 0;
    std::vector<int> started_after_nodes;  // per sum started in the pass: the nodes done before it

private:
    void count_start() {
        (in_backward ? started_in_backward : started_after_backward) += 1;
        if (in_backward) started_after_nodes.push_back(progress_calls);
    }

    std::vector<std::span<float>> started_;
    std::vector<std::span<uint16_t>> started_bf16_;
};

// The buckets' sums start in order while the backward pass runs, each once every gradient in it is
// final; the sums land in the gradients (in bf16: the sums of the gradients rounded to bf16), and a
// parameter no rank gave a gradient keeps none.
class GradientReducerSums : public ::testing::TestWithParam<bool> {};

TEST_P(GradientReducerSums, StartDuringBackwardInBucketOrder) {
    const bool bf16 = GetParam();
    auto parameter = [](std::initializer_list<float> values) {
        return Var(Tensor::from_floats({static_cast<int64_t>(values.size())}, std::vector<float>(values)), true);
    };
    // Registered first, so in the last bucket; the loss does not use it.
    std::vector<nn::NamedParameter> parameters = {{"unused", parameter({1, 1})},
                                                  {"p0", parameter({0.5f, -0.25f})},
                                                  {"p1", parameter({0.1f, 0.2f})},
                                                  {"p2", parameter({-0.3f, 0.4f})}};
    // One parameter per bucket: buckets p2, p1, p0, unused.
    distributed::GradientReducer reducer(parameters, 2, bf16);
    ASSERT_EQ(reducer.buckets(), 4);
    auto loss_of = [&] {
        const Var& p0 = parameters[1].parameter;
        const Var& p1 = parameters[2].parameter;
        const Var& p2 = parameters[3].parameter;
        return ops::sum_all(ops::mul(ops::exp(ops::mul(ops::exp(p0), p1)), p2));
    };
    // The gradients of one process, for comparison.
    loss_of().backward();
    std::vector<Tensor> alone;
    for (auto& named : parameters) {
        alone.push_back(named.parameter.grad().defined() ? named.parameter.grad().clone() : Tensor());
        named.parameter.zero_grad();
    }

    TwoEqualRanks ranks;
    reducer.begin(ranks, "test");
    ranks.in_backward = true;
    loss_of().backward(Tensor::full({}, 1.0f), reducer.hooks());
    ranks.in_backward = false;
    reducer.finish();
    EXPECT_EQ(ranks.started_in_backward, 3) << "p2, p1 and p0's buckets start during the pass";
    EXPECT_EQ(reducer.floats(), 8);
    EXPECT_EQ(reducer.last_bucket_floats(), 2);
    EXPECT_EQ(ranks.started_after_backward, 2) << "the unused parameter's bucket and the gradient flags";
    EXPECT_GE(ranks.progress_calls, 5) << "one per node of the pass: exp, mul, exp, mul and the sum's";
    EXPECT_FALSE(parameters[0].parameter.grad().defined()) << "no rank had a gradient for it";
    for (size_t i = 1; i < parameters.size(); ++i) {
        const Tensor grad = parameters[i].parameter.grad();
        ASSERT_TRUE(grad.defined()) << parameters[i].name;
        for (int64_t j = 0; j < grad.numel(); ++j) {
            const float own = alone[i].data()[j];
            const float sent = bf16 ? kernels::bf16_to_float(kernels::round_to_bf16(own)) : own;
            EXPECT_EQ(grad.data()[j], 2.0f * sent) << parameters[i].name << " [" << j << "]";
        }
    }
}

// After the first step the buckets follow the order the pass made gradients final, so each sum starts
// as soon as its gradient is final. Here parameter order is the worst guess: the last bucket's
// parameter is used by the pass's first node, and the first bucket's by none.
TEST(GradientReducer, AfterTheFirstStepBucketsFollowTheOrderGradientsBecameFinal) {
    auto parameter = [](float value) { return Var(Tensor::from_floats({1}, {value}), true); };
    std::vector<nn::NamedParameter> parameters = {
        {"p2", parameter(-0.3f)}, {"p1", parameter(0.1f)}, {"p0", parameter(0.5f)}, {"unused", parameter(1.0f)}};
    distributed::GradientReducer reducer(parameters, 1, /*bf16_sums=*/false);
    auto step = [&](TwoEqualRanks& ranks) {
        for (auto& named : parameters) named.parameter.zero_grad();
        const Var &p2 = parameters[0].parameter, &p1 = parameters[1].parameter, &p0 = parameters[2].parameter;
        Var loss = ops::sum_all(ops::mul(ops::exp(ops::mul(ops::exp(p0), p1)), p2));
        reducer.begin(ranks, "test");
        ranks.in_backward = true;
        loss.backward(Tensor::full({}, 1.0f), reducer.hooks());
        ranks.in_backward = false;
        reducer.finish();
    };
    ASSERT_EQ(reducer.bucket_order(), (std::vector<size_t>{3, 2, 1, 0})) << "reverse parameter order";
    TwoEqualRanks first;
    step(first);
    EXPECT_EQ(first.started_in_backward, 0) << "the unused parameter's bucket comes first and holds all back";
    ASSERT_EQ(reducer.bucket_order(), (std::vector<size_t>{0, 1, 2, 3})) << "p2, p1, p0 as the pass made them final";

    TwoEqualRanks second;
    step(second);
    EXPECT_EQ(second.started_in_backward, 3);
    ASSERT_EQ(second.started_after_nodes.size(), 3u);
    EXPECT_LT(second.started_after_nodes[0], second.started_after_nodes[1]) << "p2's sum starts before p1 is final";
    EXPECT_LT(second.started_after_nodes[1], second.started_after_nodes[2]) << "p1's sum starts before p0 is final";
    const float p0 = 0.5f, p1 = 0.1f, p2 = -0.3f, inner = std::exp(std::exp(p0) * p1);
    EXPECT_FLOAT_EQ(parameters[0].parameter.grad().data()[0], 2.0f * inner);
    EXPECT_FLOAT_EQ(parameters[1].parameter.grad().data()[0], 2.0f * p2 * inner * std::exp(p0));
    EXPECT_FLOAT_EQ(parameters[2].parameter.grad().data()[0], 2.0f * p2 * inner * p1 * std::exp(p0));
    EXPECT_FALSE(parameters[3].parameter.grad().defined());
}

INSTANTIATE_TEST_SUITE_P(GradientReducer, GradientReducerSums, ::testing::Values(false, true),
                         [](const ::testing::TestParamInfo<bool>& info) { return info.param ? "bf16" : "f32"; });

// bf16 sums add in f32 and round to the nearest even bf16 (8 significant bits).
TEST(GradientReducer, Bf16SumsRoundToNearestEven) {
    auto bf16 = [](float value) { return kernels::round_to_bf16(value); };
    const float ulp = 1.0f / 128.0f;  // bf16's spacing in [1, 2)
    std::vector<uint16_t> in = {bf16(1.5f), bf16(1.0f), bf16(1.0f + ulp), bf16(-3.0f)};
    std::vector<uint16_t> inout = {bf16(2.25f), bf16(ulp / 2), bf16(ulp / 2), bf16(3.0f)};
    distributed::add_bf16(in.data(), inout.data(), std::ssize(in));
    EXPECT_EQ(kernels::bf16_to_float(inout[0]), 3.75f);               // exact
    EXPECT_EQ(kernels::bf16_to_float(inout[1]), 1.0f);                // halfway: down to the even neighbour
    EXPECT_EQ(kernels::bf16_to_float(inout[2]), 1.0f + 2 * ulp);      // halfway: up to the even neighbour
    EXPECT_EQ(kernels::bf16_to_float(inout[3]), 0.0f);
}

#ifdef HNAS_MPIEXEC

// Max |parameter difference| between 1 process and 2 ranks after kSteps steps: the ranks sum their
// halves' gradients in another order, and oneDNN may block matrix products of 8 rows differently
// from products of 16 — rounding differences; 6e-8 was measured (docs/distributed.md). The runs use
// Adam's epsilon 1e-3 instead of 1e-8: with 1e-8, the update lr·m/(√v + ε) of an element whose
// gradient is rounding noise is ±lr whatever the noise's size, so the two runs' parameters may
// differ by lr-sized steps there (2e-4 measured at lr 1e-3), which would hide real differences.
constexpr double kParameterTolerance = 1e-6;
constexpr double kLossTolerance = 1e-5;
// The masked-LM runs' parameters after kSteps steps (3.2e-5 measured, 1 process vs 2 ranks).
constexpr double kMlmParameterTolerance = 3e-4;
// With bf16 gradient sums: each gradient is off by up to 2^-9 of itself, so each Adam update by about
// as much of lr (1e-3); 2.1e-5 was measured after kSteps steps.
constexpr double kBf16ParameterTolerance = 1e-4;
constexpr int kSteps = 10;
constexpr int kTimeoutSeconds = 300;        // train.collective_timeout of healthy runs
constexpr int kFailureTimeoutSeconds = 10;  // and of the failure tests

class Environment {
public:
    static const Environment& get() {
        static const Environment environment;
        return environment;
    }
    const testing::ScratchDir scratch{"hnas_distributed_test_"};
    std::string tokenizer;

private:
    Environment() {
        data::TokenizerTrainOptions options;
        options.inputs = {std::string(HNAS_SOURCE_DIR) + "/data/gigaword/train_10k/train.article.txt",
                          std::string(HNAS_SOURCE_DIR) + "/data/gigaword/train_10k/train.title.txt"};
        options.vocab_size = 500;
        options.input_sentence_size = 4000;
        tokenizer = scratch.train_tokenizer("tokenizer", options);
    }
};

// A config and the overrides that make it tiny and deterministic for these tests.
struct RunSetup {
    std::string config;
    std::vector<std::string> overrides;
};

RunSetup headline_setup() {
    const std::string source(HNAS_SOURCE_DIR);
    return {source + "/configs/gigaword_tiny.json",
            {"tokenizer.model=" + Environment::get().tokenizer,
             "data.train_articles=" + source + "/data/gigaword/train_10k/train.article.txt",
             "data.train_titles=" + source + "/data/gigaword/train_10k/train.title.txt",
             "data.valid_articles=" + source + "/data/gigaword/valid_1k/valid.article.filter.txt",
             "data.valid_titles=" + source + "/data/gigaword/valid_1k/valid.title.filter.txt",
             "model.dropout.embedding=0",
             "model.dropout.attention=0",
             "model.dropout.residual=0",
             "data.batch_sentences=16",
             "data.max_source=48",
             "data.max_target=24",
             "data.shuffle_buffer=512",
             "train.steps=" + std::to_string(kSteps),
             "train.warmup_steps=2",
             "train.epsilon=1e-3",  // see kParameterTolerance
             "train.log_every=1",
             "train.threads=1",
             "validation.every=0",
             "validation.max_batches=1",
             "validation.decode_examples=0",
             "validation.metric=loss",  // without decoded headlines there is no ROUGE-L
             "checkpoint.every=100",
             "train.collective_timeout=" + std::to_string(kTimeoutSeconds)}};
}

// Masked-LM pretraining on the Gigaword titles, `hnas prepare`d into `prepared` (made by the first call).
RunSetup mlm_setup(const fs::path& prepared) {
    const std::string source(HNAS_SOURCE_DIR);
    RunSetup setup{source + "/configs/gigaword_recipe_mlm.json",
                {"tokenizer.model=" + Environment::get().tokenizer,
                 "data.train_sources=[{\"path\": \"" + source + "/data/gigaword/train_10k/train.title.txt\", \"unit\": \"line\"}]",
                 "data.valid_sources=[]",
                 "data.packing=corpus",
                 "data.max_seq=32",
                 "data.batch_sentences=16",
                 "train.precision=f32",  // the sharding is under test, on every CPU (bf16 needs AVX-512 BF16)
                 "model.encoder_layers=1",
                 "model.dropout.embedding=0",
                 "model.dropout.attention=0",
                 "model.dropout.residual=0",
                 "train.steps=" + std::to_string(kSteps),
                 "train.warmup_steps=2",
                 "train.epsilon=1e-3",
                 "train.log_every=1",
                 "train.threads=1",
                 "validation.every=0",
                 "checkpoint.every=100",
                 "train.collective_timeout=" + std::to_string(kTimeoutSeconds)}};
    if (!fs::exists(prepared / "manifest.json")) {
        std::vector<std::string> args = {HNAS_EXECUTABLE, "prepare", "--config", setup.config, "--output", prepared.string()};
        for (const std::string& set : setup.overrides) args.insert(args.end(), {"--set", set});
        const testing::Subprocess process = testing::start_subprocess(args, prepared.string() + ".log", {});
        EXPECT_EQ(testing::finish(process), 0) << process.output();
    }
    setup.overrides.push_back("data.prepared=" + prepared.string());
    return setup;
}

// Starts `hnas train` on `setup` in `run` (through mpirun with `ranks` > 0, else directly), its output
// into run.log beside the run directory.
testing::Subprocess start(const fs::path& run, int ranks, const std::vector<std::string>& extra, const RunSetup& setup = headline_setup()) {
    std::vector<std::string> args;
    if (ranks > 0) {
        // Loopback TCP only: the tests must not depend on shared-memory transports of a container.
        args = {HNAS_MPIEXEC, "--oversubscribe", "-np", std::to_string(ranks), "--mca", "btl", "self,tcp", "--mca",
                "btl_tcp_if_include", "lo", "--mca", "oob_tcp_if_include", "lo"};
    }
    args.insert(args.end(), {HNAS_EXECUTABLE, "train", "--config", setup.config, "--out", run.string()});
    for (const std::string& set : setup.overrides) args.insert(args.end(), {"--set", set});
    args.insert(args.end(), extra.begin(), extra.end());
    const auto environment = ranks > 0 ? testing::mpirun_environment() : std::vector<std::pair<std::string, std::string>>{};
    return testing::start_subprocess(args, run.string() + ".log", environment);
}

void run_to_completion(const fs::path& run, int ranks, const std::vector<std::string>& extra = {},
                       const RunSetup& setup = headline_setup()) {
    const testing::Subprocess process = start(run, ranks, extra, setup);
    const int status = testing::finish(process);
    ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0)
        << (ranks > 0 ? std::to_string(ranks) + " ranks" : "1 process") << " failed (" << testing::describe_status(status)
        << "):\n"
        << process.output();
}

fs::path newest_checkpoint(const fs::path& run) {
    std::vector<fs::path> files;
    if (fs::exists(run / "checkpoints")) {
        for (const auto& entry : fs::directory_iterator(run / "checkpoints")) {
            if (entry.path().extension() == ".ckpt") files.push_back(entry.path());
        }
    }
    std::sort(files.begin(), files.end());
    return files.empty() ? fs::path() : files.back();
}

// Max |a − b| over the model parameters (not the optimizer moments) of two checkpoints.
double max_parameter_difference(const fs::path& a, const fs::path& b) {
    const io::Checkpoint first = io::Checkpoint::load(a.string()), second = io::Checkpoint::load(b.string());
    double worst = 0.0;
    int compared = 0;
    for (const auto& entry : first.entries()) {
        if (entry.name.rfind("optimizer/", 0) == 0 || !second.has(entry.name) || entry.type != io::EntryType::f32) continue;
        const Tensor x = first.tensor(entry.name), y = second.tensor(entry.name);
        EXPECT_EQ(x.numel(), y.numel()) << entry.name;
        for (int64_t i = 0; i < std::min(x.numel(), y.numel()); ++i) {
            worst = std::max(worst, static_cast<double>(std::fabs(x.data()[i] - y.data()[i])));
        }
        ++compared;
    }
    EXPECT_GT(compared, 10);
    return worst;
}

// A run folder in the suite's scratch folder.
struct RunDir : testing::RunDir {
    explicit RunDir(const std::string& name) : testing::RunDir(Environment::get().scratch, name) {}
};

// The single-process run all others are compared with, made once.
const fs::path& reference_run() {
    static const fs::path run = [] {
        const fs::path path = Environment::get().scratch.root / "reference";
        fs::remove_all(path);
        run_to_completion(path, 0);
        return path;
    }();
    return run;
}

TEST(Distributed, TwoRanksMatchOneProcessAtEqualGlobalBatch) {
    RunDir two("two_ranks");
    run_to_completion(two.path, 2);
    const fs::path one = newest_checkpoint(reference_run()), both = newest_checkpoint(two.path);
    ASSERT_EQ(one.filename(), both.filename());
    const double difference = max_parameter_difference(one, both);
    std::printf("max |parameter difference|, 1 process vs 2 ranks after %d steps: %.3g\n", kSteps, difference);
    EXPECT_LT(difference, kParameterTolerance);
    const auto single = testing::logged_losses(reference_run()), parallel = testing::logged_losses(two.path);
    ASSERT_EQ(single.size(), static_cast<size_t>(kSteps));
    ASSERT_EQ(parallel.size(), single.size());
    double worst_loss = 0.0;
    for (size_t i = 0; i < single.size(); ++i) {
        EXPECT_NEAR(parallel[i], single[i], kLossTolerance) << "step " << i + 1;
        worst_loss = std::max(worst_loss, std::fabs(parallel[i] - single[i]));
    }
    std::printf("max |loss difference| per step: %.3g\n", worst_loss);
    EXPECT_EQ(io::Checkpoint::load(both.string()).metadata().at("ranks").get<int>(), 2);
    // Rank 0 alone reports; the thread budget is logged.
    const std::string log = testing::Subprocess{-1, two.path.string() + ".log"}.output();
    EXPECT_NE(log.find("data-parallel over 2 ranks"), std::string::npos) << log;
    EXPECT_EQ(log.find("[rank 1] [info]"), std::string::npos) << log;
}

// With gradient accumulation only the last micro-batch's backward pass starts the sums; the earlier
// ones add into the gradients first. 2 ranks over 2 micro-batches per step still end where one
// process ends.
TEST(Distributed, AccumulatedMicroBatchesMatchOneProcess) {
    RunDir one("accumulated_one_process"), two("accumulated_two_ranks");
    const std::vector<std::string> accumulate = {"--set", "train.gradient_accumulation=2"};
    run_to_completion(one.path, 0, accumulate);
    run_to_completion(two.path, 2, accumulate);
    const double difference = max_parameter_difference(newest_checkpoint(one.path), newest_checkpoint(two.path));
    std::printf("max |parameter difference|, 1 process vs 2 ranks, 2 micro-batches per step: %.3g\n", difference);
    EXPECT_LT(difference, kParameterTolerance);
}

// bf16 gradient sums round every gradient to 8 significant bits: the parameters leave the single
// process's by far more than f32 sums' rounding differences, yet stay within kBf16ParameterTolerance.
TEST(Distributed, Bf16GradientSumsStayCloseToOneProcess) {
    RunDir two("two_ranks_bf16");
    run_to_completion(two.path, 2, {"--set", "train.bf16_gradient_sums=true"});
    const double difference = max_parameter_difference(newest_checkpoint(reference_run()), newest_checkpoint(two.path));
    std::printf("max |parameter difference|, 1 process vs 2 ranks with bf16 sums after %d steps: %.3g\n", kSteps, difference);
    EXPECT_GT(difference, kParameterTolerance) << "no sign of bf16 rounding: were the sums f32?";
    EXPECT_LT(difference, kBf16ParameterTolerance);
}

// 2 ranks → 1 process → 2 ranks, stopping and resuming in between, ends where one process ends.
TEST(Distributed, ResumesOnAnotherNumberOfRanks) {
    RunDir run("resumed");
    run_to_completion(run.path, 2, {"--stop-after", "4"});
    run_to_completion(run.path, 0, {"--resume", "--stop-after", "3"});
    run_to_completion(run.path, 2, {"--resume"});
    const fs::path last = newest_checkpoint(run.path);
    EXPECT_EQ(io::Checkpoint::load(last.string()).metadata().at("step").get<int>(), kSteps);
    EXPECT_LT(max_parameter_difference(newest_checkpoint(reference_run()), last), kParameterTolerance);
}

// Masked-LM data read from prepared shards: each rank builds only its rows of a batch (the masked tokens
// of the whole batch are the ranks' sum; MlmBatcher.ShareIsTheSliceOfTheWholeBatch checks the rows
// exactly). The masked-LM loss amplifies the sums' rounding differences step by step far more than
// the headline task's (one process on 1 and on 2 threads differs as much), so the runs are held equal
// at the first two steps and close after kSteps, also when the run moves between 2 ranks and 1 process.
TEST(Distributed, MaskedLmOnPreparedDataTwoRanksMatchOneProcess) {
    const RunSetup mlm = mlm_setup(Environment::get().scratch.root / "prepared_titles");
    RunDir one("mlm_one_process"), two("mlm_two_ranks"), moved("mlm_moved");
    ASSERT_NO_FATAL_FAILURE(run_to_completion(one.path, 0, {}, mlm));
    ASSERT_NO_FATAL_FAILURE(run_to_completion(two.path, 2, {}, mlm));
    const auto single = testing::logged_losses(one.path), parallel = testing::logged_losses(two.path);
    ASSERT_GE(single.size(), 2u);
    ASSERT_EQ(parallel.size(), single.size());
    for (size_t i = 0; i < 2; ++i) EXPECT_NEAR(parallel[i], single[i], kLossTolerance) << "step " << i + 1;
    const double difference = max_parameter_difference(newest_checkpoint(one.path), newest_checkpoint(two.path));
    std::printf("masked LM on prepared data: max |parameter difference|, 1 process vs 2 ranks after %d steps: %.3g\n", kSteps,
                difference);
    EXPECT_LT(difference, kMlmParameterTolerance);
    run_to_completion(moved.path, 2, {"--stop-after", "4"}, mlm);
    run_to_completion(moved.path, 0, {"--resume"}, mlm);
    EXPECT_EQ(io::Checkpoint::load(newest_checkpoint(moved.path).string()).metadata().at("step").get<int>(), kSteps);
    EXPECT_LT(max_parameter_difference(newest_checkpoint(one.path), newest_checkpoint(moved.path)), kMlmParameterTolerance);
}

// The pid of rank `rank` among mpirun's children (Open MPI names it in the environment).
pid_t rank_pid(pid_t mpirun, int rank) {
    const std::string wanted = "OMPI_COMM_WORLD_RANK=" + std::to_string(rank);
    for (const auto& entry : fs::directory_iterator("/proc")) {
        const std::string name = entry.path().filename().string();
        if (name.find_first_not_of("0123456789") != std::string::npos) continue;
        std::ifstream stat(entry.path() / "stat");
        std::string pid, command, state;
        pid_t parent = 0;
        stat >> pid >> command >> state >> parent;
        if (parent != mpirun) continue;
        std::ifstream environ(entry.path() / "environ");
        std::string variable;
        while (std::getline(environ, variable, '\0')) {
            if (variable == wanted) return static_cast<pid_t>(std::stol(name));
        }
    }
    return -1;
}

// Starts a long 2-rank run with the short collective timeout, waits for its first checkpoint, applies
// `signal` to rank 1 and returns the job's output once it has ended (it must, by itself: the deadline
// only keeps a broken job from hanging the suite).
std::string fail_rank_one(const fs::path& run, int signal, int* status) {
    const testing::Subprocess job =
        start(run, 2, {"--set", "train.steps=100000", "--set", "checkpoint.every=3", "--set",
                       "train.collective_timeout=" + std::to_string(kFailureTimeoutSeconds)});
    const bool checkpointed = testing::wait_until([&] { return job.ended() || !newest_checkpoint(run).empty(); });
    EXPECT_TRUE(checkpointed && !job.ended()) << "no checkpoint while the job ran:\n" << job.output();
    const pid_t victim = rank_pid(job.pid, 1);
    EXPECT_GT(victim, 0) << "rank 1 not found among mpirun's children";
    if (victim > 0) kill(victim, signal);
    const auto started = std::chrono::steady_clock::now();
    *status = testing::finish(job);
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
    EXPECT_NE(*status, -1) << "the job did not end within " << testing::kEventDeadlineSeconds << " s";
    const std::string output = job.output();
    const size_t report = output.find("rank 0 of 2: ");  // rank 0's report, when it ended the job
    std::printf("the job ended %.1f s after rank 1 got signal %d%s\n", seconds, signal,
                report == std::string::npos ? "" : (": " + output.substr(report, output.find('\n', report) - report)).c_str());
    if (victim > 0 && kill(victim, 0) == 0) {  // mpirun should have taken it down; never leave it behind
        kill(victim, SIGKILL);
    }
    const fs::path last = newest_checkpoint(run);
    EXPECT_NO_THROW(io::Checkpoint::load(last.string())) << last;
    return output;
}

TEST(Distributed, KilledRankEndsTheJobNamingIt) {
    RunDir run("killed");
    int status = 0;
    const std::string output = fail_rank_one(run.path, SIGKILL, &status);
    EXPECT_FALSE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << output;
    // mpirun's own report: "process rank 1 with PID ... exited on signal 9 (Killed)".
    EXPECT_NE(output.find("process rank 1"), std::string::npos) << output;
}

// Rank 1 may stop between operations ("rank(s) 1 did not arrive at ...") or inside one after its
// arrival note ("rank(s) 1 stopped responding in ..."); either way rank 0 names it.
TEST(Distributed, HungRankEndsTheJobAfterTheTimeoutNamingIt) {
    RunDir run("hung");
    int status = 0;
    const std::string output = fail_rank_one(run.path, SIGSTOP, &status);
    EXPECT_FALSE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << output;
    EXPECT_CONTAINS(output, "rank(s) 1 ");
    EXPECT_CONTAINS(output, "(dead or hung); ending the job");
}

#else

TEST(Distributed, NeedsMpi) { GTEST_SKIP() << "hnas was built without MPI (-DHNAS_MPI=OFF)"; }

#endif  // HNAS_MPIEXEC

}  // namespace
}  // namespace hnas
