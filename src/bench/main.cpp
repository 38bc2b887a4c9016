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
//                         scripts/bench_train.sh runs it against scripts/torch_reference.py
//   hnas-bench decode     beam search of a trained headline model over test articles, in `hnas decode`'s
//                         batches (--precision bf16: bf16 products, as `hnas decode --precision bf16`):
//                         articles/s, and a file of the batches, hypotheses and parameters from which
//                         scripts/torch_decode.py decodes the same (scripts/bench_decode.sh)
//   hnas-bench optimizer  one optimizer step (Adam, AdamW, LAMB, ALBERT's LAMB) over a reference model's
//                         parameters with random gradients: ms and the bytes it must move per second
//   hnas-bench batches    the first training batches of a run of `hnas train` (headline or mlm), with
//                         a model's initial parameters: what scripts/torch_real.py replays, so that the
//                         PyTorch twin trains on the same batches (scripts/bench_real.sh)

#include <CLI/CLI.hpp>
#include <algorithm>
#include <chrono>
#include <cmath>
#include <filesystem>
#include <cstdio>
#include <functional>
#include <iostream>
#include <nlohmann/json.hpp>
#include <numeric>
#include <vector>

#include "backend/matmul.h"
#include "base/json.h"
#include "base/read_file.h"
#include "base/system_memory.h"
#include "cli/log_color.h"
#include "cli/validators.h"
#include "data/gigaword.h"
#include "decode/headlines.h"
#include "tasks/trained_model.h"
#include "io/checkpoint.h"
#include "models/bert.h"
#include "models/model_io.h"
#include "models/seq2seq.h"
#include "tasks/headline/headline_options.h"
#include "tasks/mlm/mlm_options.h"
#include "tasks/task.h"
#include "tasks/task_support.h"
#include "nn/attention.h"
#include "ops/ops.h"
#include "optim/optimizer.h"
#include "tensor/random.h"

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

// "f32" / "bf16" (as CLI11 checked it) to the backend's setting.
void bench_linear(int warmup, int repeats, hnas::backend::MatmulPrecision precision) {
    using namespace hnas;
    backend::set_matmul_precision(precision);
    std::printf("linear forward+backward vs raw oneDNN matmul (%s, %s matmuls)\n", backend::describe().c_str(),
                name_of(precision));
    fmt::print("{:<27} {:>12} {:>12} {:>8}\n", "x·Wᵀ shape", "hnas GFLOP/s", "oneDNN", "ratio");
    const int64_t rows = 4096, in = 768;
    for (int64_t out : {int64_t{768}, int64_t{3072}}) {
        Rng rng(1);
        Var x(uniform_tensor(rng, {rows, in}, -1, 1), true);
        Var weight(uniform_tensor(rng, {out, in}, -0.05f, 0.05f), true);
        Var bias(Tensor::zeros({out}), true);
        const Tensor grad_out = uniform_tensor(rng, {rows, out}, -1, 1);
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
        fmt::print("{:<27} {:>12.1f} {:>12.1f} {:>8.3f}\n", fmt::format("({}x{})·({}x{})ᵀ", rows, in, out, in),
                   portable(flops / t_hnas * 1e-9), portable(flops / t_raw * 1e-9), portable(t_raw / t_hnas));
    }
}

// One attention layer at a fixed reference shape (batch 32, 4 heads, L = 128, d = 256), forward and
// backward, each kind timed in alternating rounds and reported relative to lnas.
void bench_attention(int warmup, int repeats, const std::vector<std::string>& only) {
    using namespace hnas;
    const int64_t batch = 32, length = 128, width = 256, heads = 4;
    std::printf("multi-head attention forward+backward, B=%lld H=%lld L=%lld d=%lld (%s)\n", static_cast<long long>(batch),
                static_cast<long long>(heads), static_cast<long long>(length), static_cast<long long>(width),
                backend::describe().c_str());
    Rng rng(1);
    const Tensor x = uniform_tensor(rng, {batch, length, width}, -1, 1);
    const Tensor grad_out = uniform_tensor(rng, {batch, length, width}, -1, 1);
    std::vector<float> valid_values;  // ragged padding, as in real batches
    for (int64_t b = 0; b < batch; ++b)
        for (int64_t t = 0; t < length; ++t) valid_values.push_back(t < length - (b % 8) * 8 ? 1.0f : 0.0f);
    const Tensor valid = Tensor::from_floats({batch, length}, valid_values);
    const ops::AttentionMask mask{valid, valid};

    std::vector<std::string> kinds;
    std::vector<std::unique_ptr<nn::MultiHeadAttention>> layers;
    for (const nn::AttentionKind* kind : nn::attention_kinds()) {
        if (kind->name != "lnas" && !only.empty() && std::find(only.begin(), only.end(), kind->name) == only.end()) continue;
        nn::AttentionOptions options;
        options.width = width;
        options.heads = heads;
        options.kind = kind->name;
        Rng init(2), dropout(3);
        kinds.push_back(kind->name);
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
    fmt::print("{:<12} {:>12} {:>10}\n", "kind", "ms/step", "vs lnas");
    for (auto& t : times) std::sort(t.begin(), t.end());
    const double lnas = times[0][2];
    for (size_t k = 0; k < kinds.size(); ++k) {
        fmt::print("{:<12} {:>12.2f} {:>10.3f}\n", kinds[k], portable(1e3 * times[k][2]), portable(times[k][2] / lnas));
    }
}

// Paper 003's OT attention (Eq. 25) against LNAS as normalizations alone, forward and backward, at
// B 32, 4 heads, n = 128 queries and input templates, and |A| = n or 2n templates (the input's and
// another example's); its cost is O(queries × n × |A|) per head against LNAS's O(queries × n).
void bench_ot(int warmup, int repeats) {
    using namespace hnas;
    const int64_t batch = 32, heads = 4, length = 128;
    fmt::print("attention normalization forward+backward, B={} H={} queries = input templates n = {} ({})\n", batch, heads,
               length, backend::describe());
    Rng rng(1);
    struct Case {
        std::string name;
        std::function<void()> step;
    };
    std::vector<Case> cases;
    Var lnas_scores(uniform_tensor(rng, {batch, heads, length, length}, -2, 2), true);
    const Tensor lnas_grad = uniform_tensor(rng, {batch, heads, length, length}, -1, 1);
    cases.push_back({"lnas, n keys", [&] {
                         lnas_scores.zero_grad();
                         ops::normalize_attention(lnas_scores, ops::AttentionMask{}, {ops::NormalizeAxis::keys}).backward(lnas_grad);
                     }});
    std::vector<Var> ot_scores, ot_similarity;
    std::vector<Tensor> ot_grads;
    for (int64_t templates : {length, 2 * length}) {
        ot_scores.emplace_back(uniform_tensor(rng, {batch, heads, length, templates}, -2, 2), true);
        ot_similarity.emplace_back(uniform_tensor(rng, {batch, heads, templates, length}, -2, 2), true);
        ot_grads.push_back(uniform_tensor(rng, {batch, heads, length, templates}, -1, 1));
    }
    for (size_t k = 0; k < ot_scores.size(); ++k) {
        cases.push_back({fmt::format("ot, |A| = {}", ot_scores[k].value().dim(3)), [&, k] {
                             ot_scores[k].zero_grad();
                             ot_similarity[k].zero_grad();
                             ops::ot_attention(ot_scores[k], ot_similarity[k], Var(), ops::AttentionMask{}).backward(ot_grads[k]);
                         }});
    }
    std::vector<std::vector<double>> times(cases.size());
    for (int round = 0; round < 5; ++round)
        for (size_t k = 0; k < cases.size(); ++k) times[k].push_back(median_seconds(cases[k].step, warmup, repeats));
    for (auto& t : times) std::sort(t.begin(), t.end());
    fmt::print("{:<16} {:>12} {:>10}\n", "normalization", "ms/step", "vs lnas");
    for (size_t k = 0; k < cases.size(); ++k) {
        fmt::print("{:<16} {:>12.2f} {:>10.1f}\n", cases[k].name, portable(1e3 * times[k][2]), portable(times[k][2] / times[0][2]));
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
    fmt::print("Gigaword pipeline alone, one thread ({}, unigram 8k)\n{:<6} {:>10} {:>14} {:>8} {:>16}\n", articles, "epoch",
               "pairs", "input tokens", "seconds", "input tokens/s");
    for (size_t epoch = 0; epoch < 3; ++epoch) {
        fmt::print("{:<6} {:>10} {:>14} {:>8.3f} {:>16.0f}\n", epoch, rows[epoch], tokens[epoch], portable(seconds[epoch]),
                   portable(static_cast<double>(tokens[epoch]) / seconds[epoch]));
    }
    std::filesystem::remove_all(scratch);
}

// ---- hnas-bench train: the reference training steps ----------------------------------------------------
// The models, batches and step are mirrored by scripts/torch_reference.py; keep the two in step.
using namespace hnas;

struct TrainBenchOptions {
    std::string task = "headline";  // headline | mlm (the config's task names)
    std::string kind = "lnas";     // encoder self-attention: lnas | dnas | hnas
    int steps = 20, warmup = 3;
    int threads = 0;               // 0: OMP_NUM_THREADS or all cores
    hnas::backend::MatmulPrecision precision = hnas::backend::MatmulPrecision::f32;
    uint64_t seed = 1;
    float learning_rate = 1e-4f;
    bool no_dropout = false;       // every dropout rate 0 (for loss comparisons across frameworks)
    std::string dump_initial;      // checkpoint of the initial parameters and the first batch
    bool matmul_bound = false;     // also time the products of one more step in oneDNN alone
    int64_t evict_mib = 64;        // the bound again with a buffer this large written before each product
};

// Shapes of the two reference workloads (docs/performance.md, Workloads).
constexpr int64_t kBenchBatch = 32, kBenchVocab = 8000, kBenchWidth = 256, kBenchHeads = 4, kBenchFfn = 1024,
                  kBenchLayers = 4, kSourceLength = 64, kTargetLength = 16, kMlmLength = 128;
constexpr double kMaskFraction = 0.15;
constexpr float kLabelSmoothing = 0.1f, kClipNorm = 1.0f;
constexpr int32_t kFirstOrdinaryId = 7;  // ids 0-6 are the tokenizer's special pieces

models::ModelConfig reference_config(const TrainBenchOptions& o) {
    using namespace hnas;
    models::ModelConfig c;
    c.architecture = o.task == "headline" ? models::Architecture::seq2seq : models::Architecture::bert;
    c.vocab_size = kBenchVocab;
    c.width = kBenchWidth;
    c.heads = kBenchHeads;
    c.ffn_width = kBenchFfn;
    c.encoder_layers = kBenchLayers;
    c.decoder_layers = kBenchLayers;
    c.activation = nn::Activation::gelu;
    c.norm = nn::NormPlacement::post;
    c.positions = models::PositionEncoding::learned;
    // As configs/gigaword_*.json and configs/mlm_*.json: position tables of 128 / 64 and 128 rows.
    c.max_source_positions = 128;
    c.max_target_positions = 64;
    c.segments = 2;
    const float p = o.no_dropout ? 0.0f : 0.1f;
    c.embedding_dropout = c.attention_dropout = c.residual_dropout = p;
    c.ffn_dropout = 0.0f;
    c.tie_embeddings = true;
    c.scale_embeddings = true;
    c.embedding_norm = false;
    c.encoder_attention.kinds.assign(static_cast<size_t>(kBenchLayers), o.kind);
    c.decoder_attention.kinds.assign(static_cast<size_t>(kBenchLayers), "lnas");
    c.cross_attention.kinds.assign(static_cast<size_t>(kBenchLayers), "lnas");
    return c;
}

// The reference model of o.task, freshly initialized: seq2seq for headline, BERT for mlm (one of the two
// is set), each kept as its own type for its loss.
struct ReferenceModel {
    std::unique_ptr<hnas::models::Seq2SeqModel> seq2seq;
    std::unique_ptr<hnas::models::BertModel> bert;

    hnas::nn::Module& operator*() const {
        if (seq2seq) return *seq2seq;
        return *bert;
    }
    hnas::nn::Module* operator->() const { return &**this; }
};

ReferenceModel reference_model(const TrainBenchOptions& o, hnas::Rng& init_rng, hnas::Rng& dropout_rng) {
    const hnas::models::ModelConfig config = reference_config(o);
    if (config.architecture == hnas::models::Architecture::seq2seq) {
        return {std::make_unique<hnas::models::Seq2SeqModel>(config, init_rng, dropout_rng), nullptr};
    }
    return {nullptr, std::make_unique<hnas::models::BertModel>(config, init_rng, dropout_rng)};
}

// One fixed-shape batch of random ordinary token ids; every position is real (no padding).
struct BenchBatch {
    std::vector<std::pair<std::string, Tensor>> tensors;  // named as in the --dump-initial checkpoint
    // What the throughputs count: the tokens the model reads (source + target for headlines, sequence
    // tokens for mlm) and the targets of the loss (target tokens, masked tokens), as the trainer does.
    int64_t input_tokens = 0, target_tokens = 0;
    const Tensor& operator[](const std::string& name) const {
        for (const auto& [n, t] : tensors)
            if (n == name) return t;
        throw Error("bench batch: no tensor " + name);
    }
};

BenchBatch make_batch(const std::string& task, Rng& rng) {
    auto random_id = [&] { return kFirstOrdinaryId + static_cast<int32_t>(rng.below(kBenchVocab - kFirstOrdinaryId)); };
    BenchBatch batch;
    if (task == "headline") {
        std::vector<int32_t> source(kBenchBatch * kSourceLength), input(kBenchBatch * kTargetLength),
            output(kBenchBatch * kTargetLength);
        for (auto& id : source) id = random_id();
        for (int64_t b = 0; b < kBenchBatch; ++b) {
            // target_input = BOS t1 .. t15, target_output = t1 .. t15 EOS
            input[static_cast<size_t>(b * kTargetLength)] = data::kBosId;
            for (int64_t t = 1; t < kTargetLength; ++t) {
                const int32_t id = random_id();
                input[static_cast<size_t>(b * kTargetLength + t)] = id;
                output[static_cast<size_t>(b * kTargetLength + t - 1)] = id;
            }
            output[static_cast<size_t>(b * kTargetLength + kTargetLength - 1)] = data::kEosId;
        }
        batch.tensors = {{"source_ids", Tensor::from_ints({kBenchBatch, kSourceLength}, source)},
                         {"source_valid", Tensor::full({kBenchBatch, kSourceLength}, 1.0f)},
                         {"target_input", Tensor::from_ints({kBenchBatch, kTargetLength}, input)},
                         {"target_output", Tensor::from_ints({kBenchBatch, kTargetLength}, output)},
                         {"target_valid", Tensor::full({kBenchBatch, kTargetLength}, 1.0f)}};
        batch.input_tokens = kBenchBatch * (kSourceLength + kTargetLength);
        batch.target_tokens = kBenchBatch * kTargetLength;
        return batch;
    }
    // mlm: round(15 %) of each row's positions, drawn without replacement, become [MASK] with the
    // original id as target; segment A is the first half of the row, segment B the second.
    const auto per_row = static_cast<int64_t>(std::lround(kMaskFraction * static_cast<double>(kMlmLength)));
    std::vector<int32_t> ids(kBenchBatch * kMlmLength), segments(kBenchBatch * kMlmLength), positions, labels;
    for (auto& id : ids) id = random_id();
    for (int64_t b = 0; b < kBenchBatch; ++b) {
        std::vector<int32_t> order(kMlmLength);
        std::iota(order.begin(), order.end(), 0);
        for (int64_t i = 0; i < per_row; ++i) {  // partial Fisher-Yates
            const auto j = i + static_cast<int64_t>(rng.below(static_cast<uint64_t>(kMlmLength - i)));
            std::swap(order[static_cast<size_t>(i)], order[static_cast<size_t>(j)]);
        }
        std::sort(order.begin(), order.begin() + per_row);
        for (int64_t i = 0; i < per_row; ++i) {
            const auto flat = static_cast<int32_t>(b * kMlmLength + order[static_cast<size_t>(i)]);
            positions.push_back(flat);
            labels.push_back(ids[static_cast<size_t>(flat)]);
            ids[static_cast<size_t>(flat)] = data::kMaskId;
        }
        for (int64_t t = 0; t < kMlmLength; ++t) segments[static_cast<size_t>(b * kMlmLength + t)] = t < kMlmLength / 2 ? 0 : 1;
    }
    const auto masked = static_cast<int64_t>(positions.size());
    batch.tensors = {{"input_ids", Tensor::from_ints({kBenchBatch, kMlmLength}, ids)},
                     {"segment_ids", Tensor::from_ints({kBenchBatch, kMlmLength}, segments)},
                     {"valid", Tensor::full({kBenchBatch, kMlmLength}, 1.0f)},
                     {"masked_positions", Tensor::from_ints({masked}, positions)},
                     {"masked_labels", Tensor::from_ints({masked}, labels)}};
    batch.input_tokens = kBenchBatch * kMlmLength;
    batch.target_tokens = masked;
    return batch;
}

// Model FLOPs of one training step: 3 × the forward matmuls (backward = 2 × forward), the usual
// convention for model-FLOP utilization; non-matmul work is not counted.
double model_flops_per_step(const std::string& task, int64_t masked_rows) {
    const double b = kBenchBatch, d = kBenchWidth, f = kBenchFfn, v = kBenchVocab, layers = kBenchLayers;
    auto attention = [&](double queries, double keys) {  // per sequence: projections + scores + A·V
        return 2.0 * (2.0 * queries * d * d + 2.0 * keys * d * d) + 2.0 * 2.0 * queries * keys * d;
    };
    auto ffn = [&](double rows) { return 2.0 * 2.0 * rows * d * f; };
    double forward = 0.0;
    if (task == "headline") {
        const double s = kSourceLength, t = kTargetLength;
        forward += layers * b * (attention(s, s) + ffn(s));
        forward += layers * b * (attention(t, t) + attention(t, s) + ffn(t));
        forward += 2.0 * b * t * d * v;  // tied output projection
    } else {
        const double l = kMlmLength, n = static_cast<double>(masked_rows);
        forward += layers * b * (attention(l, l) + ffn(l));
        forward += 2.0 * n * d * d + 2.0 * n * d * v;  // MLM head dense + output projection
    }
    return 3.0 * forward;
}

Var batch_loss(const ReferenceModel& model, const BenchBatch& batch) {
    if (model.seq2seq) {
        return model.seq2seq->loss(batch["source_ids"], batch["source_valid"], batch["target_input"], batch["target_output"],
                                   batch["target_valid"], kLabelSmoothing);
    }
    return model.bert->mlm_loss(batch["input_ids"], batch["segment_ids"], batch["valid"], batch["masked_positions"],
                                batch["masked_labels"]);
}

double peak_rss_mib() { return static_cast<double>(hnas::process_memory().peak_rss) / (1 << 20); }

void bench_train(const TrainBenchOptions& o) {
    using namespace hnas;
    if (o.threads > 0) backend::set_num_threads(o.threads);
    backend::set_matmul_precision(o.precision);
    Rng init_rng(o.seed, 1), dropout_rng(o.seed, 2), data_rng(o.seed, 3);
    const ReferenceModel model = reference_model(o, init_rng, dropout_rng);
    const auto parameters = model->named_parameters();
    optim::OptimizerOptions optimizer_options;
    optimizer_options.kind = optim::OptimizerKind::adam;
    optimizer_options.weight_decay = 0.0f;
    optim::Optimizer optimizer(parameters, optimizer_options);

    const BenchBatch first = make_batch(o.task, data_rng);
    nlohmann::ordered_json result = {{"impl", "hnas"},
                                     {"task", o.task},
                                     {"kind", o.kind},
                                     {"threads", backend::num_threads()},
                                     {"precision", name_of(o.precision)},
                                     {"batch", kBenchBatch},
                                     {"input_tokens_per_step", first.input_tokens},
                                     {"target_tokens_per_step", first.target_tokens},
                                     {"parameters", model->parameter_count()},
                                     {"dropout", !o.no_dropout}};
    if (!o.dump_initial.empty()) {
        // The step-0 loss with dropout off, then the initial parameters and the first batch.
        double eval_loss = 0.0;
        {
            NoGradScope no_grad;
            model->set_training(false);
            eval_loss = batch_loss(model, first).item();
            model->set_training(true);
        }
        nlohmann::ordered_json meta = {{"hnas_version", HNAS_VERSION},
                                       {"task", o.task},
                                       {"kind", o.kind},
                                       {"seed", o.seed},
                                       {"learning_rate", o.learning_rate},
                                       {"clip_norm", kClipNorm},
                                       {"label_smoothing", o.task == "headline" ? kLabelSmoothing : 0.0f},
                                       {"loss0_eval", eval_loss}};
        io::CheckpointWriter writer(meta);
        models::add_parameters(writer, *model);
        for (const auto& [name, tensor] : first.tensors) writer.add_tensor("batch/" + name, tensor);
        writer.write(o.dump_initial);
        result["loss0_eval"] = eval_loss;
        result["dumped"] = o.dump_initial;
    }

    // One optimizer step; the loss and the gradient norm before clipping.
    auto train_step = [&](const BenchBatch& batch) {
        optimizer.zero_grad();
        Var loss = batch_loss(model, batch);
        const float value = loss.item();
        loss.backward();
        const optim::GradientClip clip = optim::clip_factors(parameters, kClipNorm);
        optimizer.step(o.learning_rate, clip.factors);
        return std::pair<float, double>{value, clip.norm};
    };
    // With --dump-initial every step trains on the dumped batch, so the other side can replay them.
    std::vector<double> times;
    std::vector<double> losses, grad_norms;
    const int total = o.warmup + o.steps;
    backend::MatmulStats matmuls_before;
    int64_t faults_before = 0;
    for (int step = 0; step < total; ++step) {
        if (step == o.warmup) {
            matmuls_before = backend::matmul_stats();
            faults_before = process_memory().minor_faults;
        }
        const BenchBatch fresh = step == 0 || !o.dump_initial.empty() ? BenchBatch() : make_batch(o.task, data_rng);
        const BenchBatch& batch = fresh.tensors.empty() ? first : fresh;
        const auto start = Clock::now();
        const auto [value, norm] = train_step(batch);
        const double seconds = std::chrono::duration<double>(Clock::now() - start).count();
        HNAS_CHECK(std::isfinite(value), "train bench: loss ", value, " at step ", step);
        if (step >= o.warmup) times.push_back(seconds);
        if (losses.size() < 8) {
            losses.push_back(value);
            grad_norms.push_back(norm);
        }
    }
    result["warmup"] = o.warmup;
    result["steps"] = o.steps;
    result["losses"] = losses;
    result["grad_norms"] = grad_norms;
    if (!losses.empty()) result["loss0"] = losses[0];
    const int64_t masked = o.task == "mlm" ? first["masked_positions"].numel() : 0;
    const double flops = model_flops_per_step(o.task, masked);
    result["model_gflop_per_step"] = flops * 1e-9;
    if (!times.empty()) {
        std::vector<double> sorted = times;
        std::sort(sorted.begin(), sorted.end());
        const double median = sorted.size() % 2 ? sorted[sorted.size() / 2]
                                                : 0.5 * (sorted[sorted.size() / 2 - 1] + sorted[sorted.size() / 2]);
        const double total_seconds = std::accumulate(times.begin(), times.end(), 0.0);
        const double mean = total_seconds / static_cast<double>(times.size());
        result["step_ms_median"] = 1e3 * median;
        result["step_ms_mean"] = 1e3 * mean;
        result["step_ms_min"] = 1e3 * sorted.front();
        result["step_ms_max"] = 1e3 * sorted.back();
        result["input_tokens_per_s"] = static_cast<double>(first.input_tokens) / median;
        result["input_tokens_per_s_mean"] = static_cast<double>(first.input_tokens) / mean;
        result["target_tokens_per_s"] = static_cast<double>(first.target_tokens) / median;
        result["model_gflop_per_s"] = flops / median * 1e-9;
    }
    // What a timed step spends beside its matmuls' work, as the trainer's profile records count it
    // (docs/performance.md compares the two).
    if (o.steps > 0) {
        const backend::MatmulStats matmuls = backend::matmul_stats();
        const double timed_seconds = std::accumulate(times.begin(), times.end(), 0.0);
        result["minor_faults_per_step"] = static_cast<double>(process_memory().minor_faults - faults_before) / o.steps;
        result["matmul_share"] = (matmuls.seconds - matmuls_before.seconds) / timed_seconds;
        result["matmul_gflop_per_s"] = (matmuls.flops - matmuls_before.flops) / (matmuls.seconds - matmuls_before.seconds) * 1e-9;
        result["matmul_primitives"] = matmuls.primitives;
    }
    if (o.matmul_bound) {
        // One more step's products (same batch shape), each timed alone in oneDNN: what the step would
        // take if everything but its matmuls were free.
        std::vector<backend::MatmulCall> products;
        {
            backend::MatmulRecorder recorder;
            train_step(first);
            products = recorder.calls();
        }
        // Twice: on operands left in cache by the run before (the products' own rate), and on operands
        // evicted by a large write (the rate a step gets from memory: docs/performance.md).
        constexpr int kBoundRepeats = 5;
        const double bound = backend::matmul_only_seconds(products, kBoundRepeats, 0);
        const double evicted_bound = backend::matmul_only_seconds(products, kBoundRepeats, static_cast<size_t>(o.evict_mib) << 20);
        double product_flops = 0.0;
        for (const backend::MatmulCall& call : products) {
            product_flops += call.shape.flops();
        }
        result["matmul_bound_products"] = products.size();
        result["matmul_bound_ms"] = 1e3 * bound;
        result["matmul_bound_gflop_per_s"] = product_flops / bound * 1e-9;
        result["matmul_bound_evict_mib"] = o.evict_mib;
        result["matmul_bound_evicted_ms"] = 1e3 * evicted_bound;
        if (result.contains("step_ms_median")) {
            const double step_seconds = result["step_ms_median"].get<double>() * 1e-3;
            result["step_over_matmul_bound"] = step_seconds / bound;
            result["step_over_matmul_bound_evicted"] = step_seconds / evicted_bound;
        }
    }
    result["peak_rss_mib"] = peak_rss_mib();
    std::cout << result.dump() << std::endl;
}

struct DecodeBenchOptions {
    std::string checkpoint;
    std::string articles = "data/gigaword/test_1951/input.txt";
    int64_t count = 256;  // the first `count` articles
    int64_t beam = 4;
    int64_t batch = 32;
    hnas::backend::MatmulPrecision precision = hnas::backend::MatmulPrecision::f32;
    std::string out;      // where the batches, hypotheses and parameters go
};

// Beam search of a trained headline model (decoding settings from its config's test section, beam
// from the flag) over the first `count` articles, in the length-sorted batches of `hnas decode`. One
// untimed batch warms up, then one timed pass decodes them all. Prints one JSON line; `out` gets the
// model's parameters, "source/<b>/ids|valid" per batch and, in the metadata, the run's config, the
// decoding settings and every batch's best hypotheses: what scripts/torch_decode.py decodes again.
void bench_decode(const DecodeBenchOptions& o) {
    using namespace hnas;
    const tasks::TrainedCheckpoint trained = tasks::read_trained_checkpoint(o.checkpoint);
    HNAS_CHECK(trained.config.task == &tasks::headline::schema(), "decode: ", o.checkpoint, " holds a ", trained.config.task->name,
               " model; the decoding bench needs a headline checkpoint");
    const tasks::LoadedModel<models::Seq2SeqModel> loaded = tasks::load_model<models::Seq2SeqModel>(trained);
    const models::Seq2SeqModel& model = *loaded.model;
    std::vector<std::string> articles = read_lines(o.articles, "articles");
    HNAS_CHECK(static_cast<int64_t>(articles.size()) >= o.count, "decode: ", o.articles, " has ", articles.size(),
               " articles, fewer than --count ", o.count);
    articles.resize(static_cast<size_t>(o.count));
    decode::BeamOptions beam;
    static_cast<decode::DecodingConfig&>(beam) = tasks::headline::options(trained.config).decoding;
    beam.beam = o.beam;
    const int64_t max_source = tasks::headline::max_source(trained.config);
    const auto batches = decode::source_batches(trained.tokenizer, articles, o.batch, max_source);
    backend::set_matmul_precision(o.precision);

    auto decode_batch = [&](const decode::SourceBatch& b) {
        return decode::beam_search(model, b.ids, b.valid, beam, data::kBosId, data::kEosId);
    };
    decode_batch(batches.front());
    std::vector<std::vector<std::vector<decode::Hypothesis>>> hypotheses;
    const backend::MatmulStats before = backend::matmul_stats();
    const auto start = Clock::now();
    for (const auto& b : batches) hypotheses.push_back(decode_batch(b));
    const double seconds = std::chrono::duration<double>(Clock::now() - start).count();
    const backend::MatmulStats after = backend::matmul_stats();

    nlohmann::ordered_json best = nlohmann::ordered_json::array();
    int64_t generated = 0;
    for (const auto& batch_hypotheses : hypotheses) {
        nlohmann::ordered_json rows = nlohmann::ordered_json::array();
        for (const auto& row : batch_hypotheses) {
            rows.push_back(row.front().tokens);
            generated += static_cast<int64_t>(row.front().tokens.size());
        }
        best.push_back(std::move(rows));
    }
    nlohmann::ordered_json meta = {{"hnas_version", HNAS_VERSION}, {"checkpoint", o.checkpoint},
                                   {"config", trained.config.resolved},
                                   {"beam", beam.beam}, {"length_penalty", beam.length_penalty},
                                   {"min_length", beam.min_length}, {"max_length", beam.max_length},
                                   {"no_repeat_ngram", beam.no_repeat_ngram}, {"batch", o.batch},
                                   {"bos_id", data::kBosId}, {"eos_id", data::kEosId},
                                   {"batches", batches.size()}, {"hypotheses", best}};
    io::CheckpointWriter writer(meta);
    models::add_parameters(writer, model);
    for (size_t b = 0; b < batches.size(); ++b) {
        writer.add_tensor(fmt::format("source/{}/ids", b), batches[b].ids);
        writer.add_tensor(fmt::format("source/{}/valid", b), batches[b].valid);
    }
    writer.write(o.out);
    std::cout << nlohmann::json{{"impl", "hnas"}, {"beam", beam.beam}, {"articles", o.count}, {"batch", o.batch},
                                {"precision", name_of(o.precision)}, {"seconds", seconds}, {"articles_per_s", static_cast<double>(o.count) / seconds},
                                {"generated_tokens", generated}, {"matmul_calls", after.calls - before.calls},
                                {"matmul_seconds", after.seconds - before.seconds},
                                {"matmul_primitives_created", after.primitives - before.primitives},
                                {"matmul_creation_seconds", after.creation_seconds - before.creation_seconds},
                                {"peak_rss_mib", peak_rss_mib()}, {"out", o.out}}
                     .dump()
              << std::endl;
}

// The first `steps` training batches a run of `hnas train` drew (its config.json and tokenizer.model:
// the same seed draws the same batches), with the initial parameters of a model built from that
// config and its dropout-off loss on the first batch, in one checkpoint-format file:
// "batch/<step>/<field>" per batch, the parameters by their names, and in the metadata the run's
// resolved config. The parameters are drawn from the init stream of the config's seed, not the run's
// own; the twin trains from them, and the step-0 loss shows both frameworks build the same model.
void bench_batches(const std::string& run_dir, int steps, const std::string& out) {
    using namespace hnas;
    namespace fs = std::filesystem;
    const fs::path run(run_dir);
    const fs::path tokenizer_path = run / "tokenizer.model";
    HNAS_CHECK(fs::exists(tokenizer_path), "batches: ", tokenizer_path.string(),
               " is missing (a run that trained its own SentencePiece tokenizer has it)");
    config::ExperimentConfig config = tasks::load_config((run / "config.json").string());
    HNAS_CHECK(config.task == &tasks::headline::schema() || config.task == &tasks::mlm::schema(), "batches: ", run_dir,
               " is a run of task ", config.task->name, "; only headline and mlm runs can be replayed");
    const data::Tokenizer tokenizer = data::Tokenizer::load(tokenizer_path.string());
    if (config.model.vocab_size == 0) config.model.vocab_size = tokenizer.vocab_size();
    Rng init_rng(config.seed, 0), dropout_rng(config.seed, 1);
    const auto task = tasks::task_definition(*config.task).create(config, tokenizer, init_rng, dropout_rng);
    nlohmann::ordered_json meta = {{"hnas_version", HNAS_VERSION}, {"run", run_dir}, {"steps", steps}};
    const std::string config_path = (run / "config.json").string();
    meta["config"] = parse_json(read_file(config_path, "the run's config"), "the run's config " + config_path + ":");
    std::vector<std::pair<std::string, Tensor>> batches;
    for (int step = 0; step < steps; ++step) {
        task->next_batch(0, 1);
        if (step == 0) {
            NoGradScope no_grad;
            const tasks::EvaluationMode evaluation(task->model());
            meta["loss0_eval"] = task->batch_loss().item();
        }
        for (auto& [name, tensor] : task->batch_tensors()) batches.emplace_back(fmt::format("batch/{}/{}", step, name), tensor);
    }
    io::CheckpointWriter writer(meta);
    models::add_parameters(writer, task->model());
    for (const auto& [name, tensor] : batches) writer.add_tensor(name, tensor);
    writer.write(out);
    std::cout << nlohmann::json{{"batches", steps}, {"out", out}, {"loss0_eval", meta["loss0_eval"]}}.dump() << std::endl;
}

// One step of each optimizer over the reference model's parameters (--task), gradients random: the
// median ms and the rate of the bytes an update must move (w, m and v read and written, g read).
void bench_optimizer(const std::string& task, int warmup, int repeats) {
    using namespace hnas;
    TrainBenchOptions o;
    o.task = task;
    Rng init_rng(1, 1), dropout_rng(1, 2), grad_rng(1, 3);
    const ReferenceModel model = reference_model(o, init_rng, dropout_rng);
    const auto parameters = model->named_parameters();
    fmt::print("one optimizer step over the {} reference model's {} parameters ({} tensors), {} threads\n", task,
               model->parameter_count(), parameters.size(), backend::num_threads());
    fmt::print("{:<12} {:>9} {:>12}\n", "optimizer", "ms", "GB/s moved");
    for (const optim::OptimizerKind kind : {optim::OptimizerKind::adam, optim::OptimizerKind::adamw,
                                            optim::OptimizerKind::lamb, optim::OptimizerKind::lamb_albert}) {
        optim::OptimizerOptions options;
        options.kind = kind;
        options.weight_decay = 0.01f;
        optim::Optimizer optimizer(parameters, options);
        optimizer.zero_grad();
        for (const auto& named : parameters) {
            Var parameter = named.parameter;
            ops::sum_all(ops::mul(parameter, Var(normal_tensor(grad_rng, parameter.shape(), 0.0f, 1e-3f)))).backward();
        }
        const double seconds = median_seconds([&] { optimizer.step(1e-4f); }, warmup, repeats);
        const double bytes = 7.0 * sizeof(float) * static_cast<double>(model->parameter_count());
        fmt::print("{:<12} {:>9.2f} {:>12.1f}\n", name_of(kind), 1e3 * seconds, bytes / seconds / 1e9);
    }
}

}  // namespace

int main(int argc, char** argv) {
    hnas::backend::choose_openmp_waiting(argv);  // as hnas itself waits, so that the bench times what a run does
    CLI::App app{"hnas-bench: micro-benchmarks of the numeric core"};
    int warmup = 3, repeats = 15;
    hnas::backend::MatmulPrecision linear_precision = hnas::backend::MatmulPrecision::f32;
    app.add_option("--warmup", warmup, "Untimed calls before timing")->check(hnas::cli::non_negative_integer<int>());
    app.add_option("--repeats", repeats, "Timed calls; the median is reported")->check(hnas::cli::positive_integer<int>());
    app.require_subcommand(1);
    hnas::cli::add_color_option(app);
    auto* linear_command = app.add_subcommand("linear", "linear forward+backward GFLOP/s against raw oneDNN matmul");
    linear_command->add_option("--precision", linear_precision, "matmul precision: f32 or bf16")
        ->transform(hnas::cli::enum_choices<hnas::backend::MatmulPrecision>());
    linear_command->callback([&] { bench_linear(warmup, repeats, linear_precision); });
    std::vector<std::string> kinds;
    auto* attention_command = app.add_subcommand("attention", "attention forward+backward per kind, relative to lnas");
    attention_command->add_option("--kind", kinds, "Only these kinds (and lnas, the reference); default all")
        ->check(CLI::IsMember(hnas::nn::attention_kind_names()));
    attention_command->callback([&] { bench_attention(warmup, repeats, kinds); });
    app.add_subcommand("ot", "paper 003's OT attention against lnas as normalizations, |A| = n and 2n templates")
        ->callback([&] { bench_ot(warmup, repeats); });
    std::string articles = "data/gigaword/derived/train_all.article.txt", titles = "data/gigaword/derived/train_all.title.txt";
    auto* data_command = app.add_subcommand("data", "the Gigaword data pipeline alone, input tokens/s per epoch");
    data_command->add_option("--articles", articles, "Article file")->check(CLI::ExistingFile);
    data_command->add_option("--titles", titles, "Title file")->check(CLI::ExistingFile);
    data_command->callback([&] { bench_data(articles, titles); });
    TrainBenchOptions train_options;
    auto* train_command = app.add_subcommand(
        "train", "training steps of the reference headline / mlm models (docs/performance.md); prints one JSON line");
    train_command->add_option("--task", train_options.task, "headline or mlm")->check(CLI::IsMember({"headline", "mlm"}));
    train_command->add_option("--kind", train_options.kind, "encoder self-attention: any registered kind")
        ->check(CLI::IsMember(hnas::nn::attention_kind_names()));
    train_command->add_option("--steps", train_options.steps, "Timed training steps")
        ->check(hnas::cli::non_negative_integer<int>());
    train_command->add_option("--warmup", train_options.warmup, "Untimed training steps first")
        ->check(hnas::cli::non_negative_integer<int>());
    train_command->add_option("--threads", train_options.threads, "OpenMP threads; 0: OMP_NUM_THREADS or all cores")
        ->check(hnas::cli::non_negative_integer<int>());
    train_command->add_option("--precision", train_options.precision, "matmul precision: f32 or bf16")
        ->transform(hnas::cli::enum_choices<hnas::backend::MatmulPrecision>());
    train_command->add_option("--seed", train_options.seed, "Seeds initialization, dropout and the random batches")
        ->check(hnas::cli::non_negative_integer<uint64_t>());
    train_command->add_option("--lr", train_options.learning_rate, "Adam's (constant) learning rate")
        ->check(hnas::cli::number_in<float>(0, 10));
    train_command->add_flag("--no-dropout", train_options.no_dropout, "Every dropout rate 0 (loss comparisons)");
    train_command->add_flag("--matmul-bound", train_options.matmul_bound,
                            "Also time one step's matrix products alone in oneDNN; reports step / that bound");
    train_command->add_option("--evict-mib", train_options.evict_mib,
                              "With --matmul-bound, also time the products after writing a buffer of this many MiB "
                              "(operands from memory, not cache); at least 1")
        ->check(hnas::cli::positive_integer<int64_t>());
    train_command->add_option("--dump-initial", train_options.dump_initial,
                              "Write the initial parameters, the first batch and the dropout-off step-0 loss to this "
                              "checkpoint (every step then trains on that batch)");
    train_command->callback([&] {
        if (train_options.steps + train_options.warmup == 0) throw CLI::ValidationError("--steps", "--steps + --warmup must be at least 1");
        bench_train(train_options);
    });
    DecodeBenchOptions decode_options;
    auto* decode_command = app.add_subcommand(
        "decode", "beam search of a trained headline model over test articles; for scripts/torch_decode.py");
    decode_command->add_option("--checkpoint", decode_options.checkpoint, "A checkpoint of hnas train (headline)")
        ->required()
        ->check(CLI::ExistingFile);
    decode_command->add_option("--articles", decode_options.articles, "Article file, one per line")
        ->check(CLI::ExistingFile);
    decode_command->add_option("--count", decode_options.count, "Articles decoded (the file's first)")
        ->check(hnas::cli::positive_integer<int64_t>());
    decode_command->add_option("--beam", decode_options.beam, "Beam size (1: greedy)")
        ->check(hnas::cli::positive_integer<int64_t>());
    decode_command->add_option("--batch", decode_options.batch, "Articles decoded together")
        ->check(hnas::cli::positive_integer<int64_t>());
    decode_command->add_option("--precision", decode_options.precision, "matmul precision: f32 or bf16")
        ->transform(hnas::cli::enum_choices<hnas::backend::MatmulPrecision>());
    decode_command->add_option("--out", decode_options.out, "The file to write")->required();
    decode_command->callback([&] { bench_decode(decode_options); });
    std::string optimizer_task = "headline";
    auto* optimizer_command = app.add_subcommand("optimizer", "one step of each optimizer over a reference model's parameters");
    optimizer_command->add_option("--task", optimizer_task, "headline or mlm")->check(CLI::IsMember({"headline", "mlm"}));
    optimizer_command->callback([&] { bench_optimizer(optimizer_task, warmup, repeats); });
    std::string batches_run, batches_out;
    int batches_steps = 400;
    auto* batches_command = app.add_subcommand(
        "batches", "a run's first training batches and a model's initial parameters, for scripts/torch_real.py");
    batches_command->add_option("--run", batches_run, "Run directory of hnas train (config.json, tokenizer.model)")
        ->required()
        ->check(CLI::ExistingDirectory);
    batches_command->add_option("--steps", batches_steps, "Batches to write")->check(hnas::cli::positive_integer<int>());
    batches_command->add_option("--out", batches_out, "The file to write")->required();
    batches_command->callback([&] { bench_batches(batches_run, batches_steps, batches_out); });
    try {
        CLI11_PARSE(app, argc, argv);
    } catch (const std::exception& e) {
        std::fprintf(stderr, "hnas-bench: %s\n", e.what());
        return 1;
    }
    return 0;
}
