// hnas-bench: micro-benchmarks of the numeric core, printed as tables. Not a test: it asserts nothing.
//   hnas-bench linear     the linear op's forward+backward against raw oneDNN matmuls on the same shapes
//   hnas-bench attention  one multi-head attention layer's forward+backward for every attention kind
//   hnas-bench data       the Gigaword data pipeline alone: tokens/s per epoch on the bundled pairs
#include <CLI/CLI.hpp>
#include <algorithm>
#include <chrono>
#include <filesystem>
#include <cstdio>
#include <functional>
#include <vector>

#include "backend/matmul.h"
#include "data/gigaword.h"
#include "nn/attention.h"
#include "ops/ops.h"

namespace {

using Clock = std::chrono::steady_clock;

// Median seconds per call of `body` over `repeats` timed calls, after `warmup` untimed ones.
double median_seconds(const std::function<void()>& body, int warmup, int repeats) {
    for (int i = 0; i < warmup; ++i) body();
    std::vector<double> times;
    for (int i = 0; i < repeats; ++i) {
        const auto start = Clock::now();
        body();
        times.push_back(std::chrono::duration<double>(Clock::now() - start).count());
    }
    std::sort(times.begin(), times.end());
    return times[times.size() / 2];
}

void bench_linear(int warmup, int repeats) {
    using namespace hnas;
    std::printf("linear forward+backward vs raw oneDNN matmul (%s)\n", backend::describe().c_str());
    std::printf("%-28s %12s %12s %8s\n", "x·Wᵀ shape", "hnas GFLOP/s", "oneDNN", "ratio");
    const int64_t rows = 4096, in = 768;
    for (int64_t out : {int64_t{768}, int64_t{3072}}) {
        Rng rng(1);
        Var x(rng.uniform_tensor({rows, in}, -1, 1), true);
        Var weight(rng.uniform_tensor({out, in}, -0.05f, 0.05f), true);
        Var bias(Tensor::zeros({out}), true);
        const Tensor grad_out = rng.uniform_tensor({rows, out}, -1, 1);
        // The op: y = x·Wᵀ + b, then dx, dW and db from a given output gradient.
        auto hnas_step = [&] {
            x.zero_grad();
            weight.zero_grad();
            bias.zero_grad();
            ops::linear(x, weight, bias).backward(grad_out);
        };
        Tensor y = Tensor::empty({rows, out}), dx = Tensor::empty({rows, in}), dw = Tensor::empty({out, in});
        auto raw_step = [&] {
            backend::matmul(x.value().data(), weight.value().data(), y.data(), {1, rows, out, in, false, true});
            backend::matmul(grad_out.data(), weight.value().data(), dx.data(), {1, rows, in, out});
            backend::matmul(grad_out.data(), x.value().data(), dw.data(), {1, out, in, rows, true, false});
        };
        const double flops = 3.0 * 2.0 * static_cast<double>(rows * in * out);
        // Alternate the two in rounds so drifts in machine speed hit both alike; report medians.
        std::vector<double> raw_times, hnas_times;
        for (int round = 0; round < 5; ++round) {
            raw_times.push_back(median_seconds(raw_step, warmup, repeats));
            hnas_times.push_back(median_seconds(hnas_step, warmup, repeats));
        }
        std::sort(raw_times.begin(), raw_times.end());
        std::sort(hnas_times.begin(), hnas_times.end());
        const double t_raw = raw_times[2], t_hnas = hnas_times[2];
        char label[64];
        std::snprintf(label, sizeof label, "(%lldx%lld)·(%lldx%lld)ᵀ", static_cast<long long>(rows),
                      static_cast<long long>(in), static_cast<long long>(out), static_cast<long long>(in));
        std::printf("%-30s %12.1f %12.1f %8.3f\n", label, flops / t_hnas * 1e-9, flops / t_raw * 1e-9, t_raw / t_hnas);
    }
}

// The attention layer of the papers' comparison (batch 32, 4 heads, L = 128, d = 256), forward and
// backward, each kind timed in alternating rounds and reported relative to lnas.
void bench_attention(int warmup, int repeats) {
    using namespace hnas;
    const int64_t batch = 32, length = 128, width = 256, heads = 4;
    std::printf("multi-head attention forward+backward, B=%lld H=%lld L=%lld d=%lld (%s)\n", static_cast<long long>(batch),
                static_cast<long long>(heads), static_cast<long long>(length), static_cast<long long>(width),
                backend::describe().c_str());
    Rng rng(1);
    const Tensor x = rng.uniform_tensor({batch, length, width}, -1, 1);
    const Tensor grad_out = rng.uniform_tensor({batch, length, width}, -1, 1);
    std::vector<float> valid_values;  // ragged padding, as in real batches
    for (int64_t b = 0; b < batch; ++b)
        for (int64_t t = 0; t < length; ++t) valid_values.push_back(t < length - (b % 8) * 8 ? 1.0f : 0.0f);
    const Tensor valid = Tensor::from_floats({batch, length}, valid_values);
    const ops::AttentionMask mask{valid, valid};

    std::vector<std::string> kinds;
    std::vector<std::unique_ptr<nn::MultiHeadAttention>> layers;
    for (const auto& kind : nn::attention_kinds()) {
        nn::AttentionOptions options;
        options.width = width;
        options.heads = heads;
        options.kind = kind.name;
        Rng init(2), dropout(3);
        kinds.push_back(kind.name);
        layers.push_back(std::make_unique<nn::MultiHeadAttention>(options, init, dropout));
    }
    std::vector<std::vector<double>> times(kinds.size());
    for (int round = 0; round < 5; ++round) {
        for (size_t k = 0; k < kinds.size(); ++k) {
            Var input(x, true);
            times[k].push_back(median_seconds(
                [&] {
                    layers[k]->zero_grad();
                    input.zero_grad();
                    layers[k]->forward(input, input, mask).backward(grad_out);
                },
                warmup, repeats));
        }
    }
    std::printf("%-12s %12s %10s\n", "kind", "ms/step", "vs lnas");
    for (auto& t : times) std::sort(t.begin(), t.end());
    const double lnas = times[0][2];
    for (size_t k = 0; k < kinds.size(); ++k) {
        std::printf("%-12s %12.2f %10.3f\n", kinds[k].c_str(), 1e3 * times[k][2], times[k][2] / lnas);
    }
}

// The data pipeline on its own (one thread, no prefetch): files -> tokenizer -> shuffled, bucketed,
// padded batches, for three epochs; epoch 0 includes the checking pass and fills the word cache.
void bench_data(const std::string& articles, const std::string& titles) {
    using namespace hnas;
    const std::filesystem::path scratch = std::filesystem::temp_directory_path() / "hnas_bench_data";
    std::filesystem::create_directories(scratch);
    data::TokenizerTrainOptions vocab;
    vocab.inputs = {articles, titles};
    vocab.model_prefix = (scratch / "giga8k").string();
    vocab.vocab_size = 8000;
    vocab.input_sentence_size = 20000;
    data::train_tokenizer(vocab);
    data::Seq2SeqDataOptions options;
    options.article_path = articles;
    options.title_path = titles;
    options.batch.max_sentences = 64;
    options.epochs = 3;
    options.prefetch = 0;
    auto start = Clock::now();
    data::Seq2SeqBatcher batcher(data::Tokenizer::load(vocab.model_prefix + ".model"), options);
    std::vector<int64_t> rows(3, 0), tokens(3, 0);
    std::vector<double> seconds(3, 0.0);
    while (true) {
        const auto epoch = static_cast<size_t>(batcher.position().epoch);
        const auto batch = batcher.next();
        if (!batch) break;
        rows[epoch] += batch->source_ids.dim(0);
        tokens[epoch] += batch->source_tokens + batch->target_tokens;
        if (static_cast<size_t>(batcher.position().epoch) != epoch) {
            const auto now = Clock::now();
            seconds[epoch] = std::chrono::duration<double>(now - start).count();
            start = now;
        }
    }
    std::printf("Gigaword pipeline alone, one thread (%s, unigram 8k)\n%-6s %10s %12s %8s %14s\n", articles.c_str(), "epoch",
                "pairs", "tokens", "seconds", "tokens/s");
    for (size_t epoch = 0; epoch < 3; ++epoch) {
        std::printf("%-6zu %10lld %12lld %8.3f %14.0f\n", epoch, static_cast<long long>(rows[epoch]),
                    static_cast<long long>(tokens[epoch]), seconds[epoch], static_cast<double>(tokens[epoch]) / seconds[epoch]);
    }
    std::filesystem::remove_all(scratch);
}

}  // namespace

int main(int argc, char** argv) {
    CLI::App app{"hnas-bench: micro-benchmarks of the numeric core"};
    int warmup = 3, repeats = 15;
    app.add_option("--warmup", warmup, "Untimed calls before timing")->check(CLI::NonNegativeNumber);
    app.add_option("--repeats", repeats, "Timed calls; the median is reported")->check(CLI::PositiveNumber);
    app.require_subcommand(1);
    app.add_subcommand("linear", "linear forward+backward GFLOP/s against raw oneDNN matmul")->callback([&] {
        bench_linear(warmup, repeats);
    });
    app.add_subcommand("attention", "attention forward+backward per kind, relative to lnas")->callback([&] {
        bench_attention(warmup, repeats);
    });
    std::string articles = "data/gigaword/derived/train_all.article.txt", titles = "data/gigaword/derived/train_all.title.txt";
    auto* data_command = app.add_subcommand("data", "the Gigaword data pipeline alone, tokens/s per epoch");
    data_command->add_option("--articles", articles, "Article file")->check(CLI::ExistingFile);
    data_command->add_option("--titles", titles, "Title file")->check(CLI::ExistingFile);
    data_command->callback([&] { bench_data(articles, titles); });
    CLI11_PARSE(app, argc, argv);
    return 0;
}
