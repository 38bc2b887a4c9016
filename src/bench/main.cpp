// hnas-bench: micro-benchmarks of the numeric core, printed as tables. Not a test: it asserts nothing.
//   hnas-bench linear     the linear op's forward+backward against raw oneDNN matmuls on the same shapes
//                         (--precision bf16: both with bf16 products)
//   hnas-bench attention  one multi-head attention layer's forward+backward for every attention kind
//                         (--kind K: only K, and lnas as the reference; repeatable, for profiling)
//   hnas-bench ot         paper 003's OT attention (Eq. 25) against LNAS as normalizations alone, with
//                         |A| = n and 2n templates at n = 128
//   hnas-bench data       the Gigaword data pipeline alone: input tokens/s per epoch on the bundled pairs
//   hnas-bench train      whole training steps of the reference models (headline, mlm; docs/performance.md) on random
//                         fixed-shape batches: one JSON line (input and target tokens/s, step times, peak RSS, losses);
//                         --precision bf16 for bf16 matmuls; --matmul-bound: also the step's products
//                         timed alone in oneDNN, and the step over that bound, with
//                         operands in cache and again evicted by a --evict-mib write before each product
//                         `scripts/bench.sh train` runs it against scripts/torch_reference.py
//   hnas-bench decode     beam search of a trained headline model over test articles, in `hnas decode`'s
//                         batches (--precision bf16: bf16 products, as `hnas decode --precision bf16`):
//                         articles/s, and a file of the batches, hypotheses and parameters from which
//                         `scripts/torch_reference.py --sources` decodes the same (`scripts/bench.sh decode`)
//   hnas-bench optimizer  one optimizer step (Adam, AdamW, LAMB, ALBERT's LAMB) over a reference model's
//                         parameters with random gradients: ms and the bytes it must move per second
//   hnas-bench batches    the first training batches of a run of `hnas train` (headline or mlm), with
//                         a model's initial parameters: what `scripts/torch_reference.py --batches` replays,
//                         so that the PyTorch twin trains on the same batches (`scripts/bench.sh real`)

#include <CLI/CLI.hpp>

#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "bench/bench.h"
#include "command_line/log_color.h"
#include "command_line/validators.h"
#include "nn/attention.h"

namespace hnas::bench {
namespace {

// The flags every micro-benchmark shares.
struct Repetitions {
    int warmup = 3, repeats = 15;
};

void add_kernel_commands(CLI::App& app, const Repetitions& r) {
    auto linear_precision = std::make_shared<backend::MatmulPrecision>(backend::MatmulPrecision::f32);
    auto* linear_command = app.add_subcommand("linear", "linear forward+backward GFLOP/s against raw oneDNN matmul");
    linear_command->add_option("--precision", *linear_precision, "matmul precision: f32 or bf16")
        ->transform(command_line::enum_choices<backend::MatmulPrecision>());
    linear_command->callback([&r, linear_precision] { bench_linear(r.warmup, r.repeats, *linear_precision); });
    auto kinds = std::make_shared<std::vector<std::string>>();
    auto* attention_command = app.add_subcommand("attention", "attention forward+backward per kind, relative to lnas");
    attention_command->add_option("--kind", *kinds, "Only these kinds (and lnas, the reference); default all")
        ->check(CLI::IsMember(nn::attention_kind_names()));
    attention_command->callback([&r, kinds] { bench_attention(r.warmup, r.repeats, *kinds); });
    app.add_subcommand("ot", "paper 003's OT attention against lnas as normalizations, |A| = n and 2n templates")
        ->callback([&r] { bench_ot(r.warmup, r.repeats); });
}

void add_data_command(CLI::App& app) {
    struct Files {
        std::string articles = "data/gigaword/derived/train_all.article.txt", titles = "data/gigaword/derived/train_all.title.txt";
    };
    auto files = std::make_shared<Files>();
    auto* data_command = app.add_subcommand("data", "the Gigaword data pipeline alone, input tokens/s per epoch");
    data_command->add_option("--articles", files->articles, "Article file")->check(CLI::ExistingFile);
    data_command->add_option("--titles", files->titles, "Title file")->check(CLI::ExistingFile);
    data_command->callback([files] { bench_data(files->articles, files->titles); });
}

void add_train_command(CLI::App& app) {
    auto o = std::make_shared<TrainBenchOptions>();
    auto* train_command = app.add_subcommand(
        "train", "training steps of the reference headline / mlm models (docs/performance.md); prints one JSON line");
    train_command->add_option("--task", o->task, "headline or mlm")->check(CLI::IsMember({"headline", "mlm"}));
    train_command->add_option("--kind", o->kind, "encoder self-attention: any registered kind")
        ->check(CLI::IsMember(nn::attention_kind_names()));
    train_command->add_option("--steps", o->steps, "Timed training steps")->check(command_line::non_negative_integer<int>());
    train_command->add_option("--warmup", o->warmup, "Untimed training steps first")->check(command_line::non_negative_integer<int>());
    train_command->add_option("--threads", o->threads, "OpenMP threads; 0: OMP_NUM_THREADS or all cores")
        ->check(command_line::non_negative_integer<int>());
    train_command->add_option("--precision", o->precision, "matmul precision: f32 or bf16")
        ->transform(command_line::enum_choices<backend::MatmulPrecision>());
    train_command->add_option("--seed", o->seed, "Seeds initialization, dropout and the random batches")
        ->check(command_line::non_negative_integer<uint64_t>());
    train_command->add_option("--lr", o->learning_rate, "Adam's (constant) learning rate")->check(command_line::number_in<float>(0, 10));
    train_command->add_flag("--no-dropout", o->no_dropout, "Every dropout rate 0 (loss comparisons)");
    train_command->add_flag("--matmul-bound", o->matmul_bound,
                            "Also time one step's matrix products alone in oneDNN; reports step / that bound");
    train_command->add_option("--evict-mib", o->evict_mib,
                              "With --matmul-bound, also time the products after writing a buffer of this many MiB "
                              "(operands from memory, not cache); at least 1")
        ->check(command_line::positive_integer<int64_t>());
    train_command->add_option("--dump-initial", o->dump_initial,
                              "Write the initial parameters, the first batch and the dropout-off step-0 loss to this "
                              "checkpoint (every step then trains on that batch)");
    train_command->add_option("--perf-fifos", o->perf_fifos,
                              "CONTROL ACK: the FIFOs of `perf record --delay=-1 --control fifo:CONTROL,ACK`; perf "
                              "then samples the timed steps alone")
        ->expected(2);
    train_command->callback([o] {
        if (o->steps + o->warmup == 0) throw CLI::ValidationError("--steps", "--steps + --warmup must be at least 1");
        bench_train(*o);
    });
}

void add_decode_command(CLI::App& app) {
    auto o = std::make_shared<DecodeBenchOptions>();
    auto* decode_command = app.add_subcommand(
        "decode", "beam search of a trained headline model over test articles; for scripts/torch_reference.py --sources");
    decode_command->add_option("--checkpoint", o->checkpoint, "A checkpoint of hnas train (headline)")
        ->required()
        ->check(CLI::ExistingFile);
    decode_command->add_option("--articles", o->articles, "Article file, one per line")->check(CLI::ExistingFile);
    decode_command->add_option("--count", o->count, "Articles decoded (the file's first)")->check(command_line::positive_integer<int64_t>());
    decode_command->add_option("--beam", o->beam, "Beam size (1: greedy)")->check(command_line::positive_integer<int64_t>());
    decode_command->add_option("--batch", o->batch, "Articles decoded together")->check(command_line::positive_integer<int64_t>());
    decode_command->add_option("--precision", o->precision, "matmul precision: f32 or bf16")
        ->transform(command_line::enum_choices<backend::MatmulPrecision>());
    decode_command->add_option("--out", o->out, "The file to write")->required();
    decode_command->callback([o] { bench_decode(*o); });
}

void add_optimizer_command(CLI::App& app, const Repetitions& r) {
    auto task = std::make_shared<std::string>("headline");
    auto* optimizer_command = app.add_subcommand("optimizer", "one step of each optimizer over a reference model's parameters");
    optimizer_command->add_option("--task", *task, "headline or mlm")->check(CLI::IsMember({"headline", "mlm"}));
    optimizer_command->callback([&r, task] { bench_optimizer(*task, r.warmup, r.repeats); });
}

void add_batches_command(CLI::App& app) {
    struct BatchesOptions {
        std::string run, out;
        int steps = 400;
    };
    auto o = std::make_shared<BatchesOptions>();
    auto* batches_command = app.add_subcommand(
        "batches", "a run's first training batches and a model's initial parameters, for scripts/torch_reference.py --batches");
    batches_command->add_option("--run", o->run, "Run directory of hnas train (config.json, tokenizer.model)")
        ->required()
        ->check(CLI::ExistingDirectory);
    batches_command->add_option("--steps", o->steps, "Batches to write")->check(command_line::positive_integer<int>());
    batches_command->add_option("--out", o->out, "The file to write")->required();
    batches_command->callback([o] { bench_batches(o->run, o->steps, o->out); });
}

}  // namespace
}  // namespace hnas::bench

int main(int argc, char** argv) {
    using namespace hnas::bench;
    hnas::backend::choose_openmp_waiting(argv);  // as hnas itself waits, so that the bench times what a run does
    CLI::App app{"hnas-bench: micro-benchmarks of the numeric core"};
    Repetitions repetitions;
    app.add_option("--warmup", repetitions.warmup, "Untimed calls before timing")->check(hnas::command_line::non_negative_integer<int>());
    app.add_option("--repeats", repetitions.repeats, "Timed calls; the median is reported")->check(hnas::command_line::positive_integer<int>());
    app.require_subcommand(1);
    hnas::command_line::add_color_option(app);
    add_kernel_commands(app, repetitions);
    add_data_command(app);
    add_train_command(app);
    add_decode_command(app);
    add_optimizer_command(app, repetitions);
    add_batches_command(app);
    try {
        CLI11_PARSE(app, argc, argv);
    } catch (const std::exception& e) {
        std::fprintf(stderr, "hnas-bench: %s\n", e.what());
        return 1;
    }
    return 0;
}
