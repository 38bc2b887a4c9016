// hnas-bench train and optimizer: whole training steps and optimizer steps of the reference models.
// The models, batches and step are mirrored by scripts/torch_reference.py; keep the two in step.
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <iostream>
#include <nlohmann/json.hpp>
#include <numeric>

#include "base/system_memory.h"
#include "bench/bench.h"
#include "data/tokenizer.h"
#include "io/checkpoint.h"
#include "models/bert.h"
#include "models/model_io.h"
#include "models/seq2seq.h"
#include "ops/ops.h"
#include "optim/optimizer.h"
#include "tensor/random.h"

namespace hnas::bench {

namespace {

// Shapes of the two reference workloads (docs/performance.md, Workloads).
constexpr int64_t kBenchBatch = 32, kBenchVocab = 8000, kBenchWidth = 256, kBenchHeads = 4, kBenchFfn = 1024,
                  kBenchLayers = 4, kSourceLength = 64, kTargetLength = 16, kMlmLength = 128;
constexpr double kMaskFraction = 0.15;
constexpr float kLabelSmoothing = 0.1f, kClipNorm = 1.0f;
constexpr int32_t kFirstOrdinaryId = 7;  // ids 0-6 are the tokenizer's special pieces

models::ModelConfig reference_config(const TrainBenchOptions& o) {
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
    c.decoder_attention.kinds.assign(static_cast<size_t>(kBenchLayers), nn::default_attention_kind());
    c.cross_attention.kinds.assign(static_cast<size_t>(kBenchLayers), nn::default_attention_kind());
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

// What the run is, before any step: the task, shapes, threads and parameters.
nlohmann::ordered_json describe_run(const TrainBenchOptions& o, const ReferenceModel& model, const BenchBatch& first) {
    return {{"impl", "hnas"},
            {"task", o.task},
            {"kind", o.kind},
            {"threads", backend::num_threads()},
            {"precision", name_of(o.precision)},
            {"batch", kBenchBatch},
            {"input_tokens_per_step", first.input_tokens},
            {"target_tokens_per_step", first.target_tokens},
            {"parameters", model->parameter_count()},
            {"dropout", !o.no_dropout}};
}

// Writes the initial parameters and the first batch to o.dump_initial, with the step-0 loss with
// dropout off, which it returns.
double dump_initial(const TrainBenchOptions& o, const ReferenceModel& model, const BenchBatch& first) {
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
    return eval_loss;
}

// One optimizer step of the reference model with Adam, clipped as the trainer clips.
class TrainStep {
public:
    TrainStep(const TrainBenchOptions& o, const ReferenceModel& model)
        : options_(o), model_(model), parameters_(model->named_parameters()), optimizer_(parameters_, adam()) {}

    // The loss and the gradient norm before clipping.
    std::pair<float, double> operator()(const BenchBatch& batch) {
        optimizer_.zero_grad();
        Var loss = batch_loss(model_, batch);
        const float value = loss.item();
        loss.backward();
        const optim::GradientClip clip = optim::clip_factors(parameters_, kClipNorm);
        optimizer_.step(options_.learning_rate, clip.factors);
        return {value, clip.norm};
    }

private:
    static optim::OptimizerOptions adam() {
        optim::OptimizerOptions options;
        options.kind = optim::OptimizerKind::adam;
        options.weight_decay = 0.0f;
        return options;
    }

    const TrainBenchOptions& options_;
    const ReferenceModel& model_;
    std::vector<nn::NamedParameter> parameters_;
    optim::Optimizer optimizer_;
};

// What the warmup and timed steps measured.
struct StepRecord {
    std::vector<double> times;               // seconds of each timed step
    std::vector<double> losses, grad_norms;  // of the first 8 steps
    backend::MatmulStats matmuls_before;     // the counters when timing began
    int64_t faults_before = 0;
};

// o.warmup untimed steps, then o.steps timed ones. With --dump-initial every step trains on the dumped
// batch, so the other side can replay them.
StepRecord run_steps(const TrainBenchOptions& o, TrainStep& train_step, const BenchBatch& first, Rng& data_rng) {
    StepRecord record;
    PerfControl perf = o.perf_fifos.empty() ? PerfControl() : PerfControl(o.perf_fifos[0], o.perf_fifos[1]);
    const int total = o.warmup + o.steps;
    for (int step = 0; step < total; ++step) {
        if (step == o.warmup) {
            record.matmuls_before = backend::matmul_stats();
            record.faults_before = process_memory().minor_faults;
            perf.enable();
        }
        const BenchBatch fresh = step == 0 || !o.dump_initial.empty() ? BenchBatch() : make_batch(o.task, data_rng);
        const BenchBatch& batch = fresh.tensors.empty() ? first : fresh;
        const auto start = Clock::now();
        const auto [value, norm] = train_step(batch);
        const double seconds = std::chrono::duration<double>(Clock::now() - start).count();
        HNAS_CHECK(std::isfinite(value), "train bench: loss ", value, " at step ", step);
        if (step >= o.warmup) record.times.push_back(seconds);
        if (record.losses.size() < 8) {
            record.losses.push_back(value);
            record.grad_norms.push_back(norm);
        }
    }
    if (o.steps > 0) perf.disable();
    return record;
}

// Step times (median, mean, extremes) and the throughputs at the median step.
void add_step_times(const std::vector<double>& times, const BenchBatch& first, double flops, nlohmann::ordered_json& result) {
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
void add_matmul_share(const StepRecord& record, int steps, nlohmann::ordered_json& result) {
    const backend::MatmulStats matmuls = backend::matmul_stats();
    const double timed_seconds = std::accumulate(record.times.begin(), record.times.end(), 0.0);
    result["minor_faults_per_step"] = static_cast<double>(process_memory().minor_faults - record.faults_before) / steps;
    result["matmul_share"] = (matmuls.seconds - record.matmuls_before.seconds) / timed_seconds;
    result["matmul_gflop_per_s"] =
        (matmuls.flops - record.matmuls_before.flops) / (matmuls.seconds - record.matmuls_before.seconds) * 1e-9;
    result["matmul_primitives"] = matmuls.primitives;
}

// One more step's products (same batch shape), each timed alone in oneDNN: what the step would take if
// everything but its matmuls were free.
void add_matmul_bound(const TrainBenchOptions& o, TrainStep& train_step, const BenchBatch& first, nlohmann::ordered_json& result) {
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

}  // namespace

void bench_train(const TrainBenchOptions& o) {
    if (o.threads > 0) backend::set_num_threads(o.threads);
    backend::set_matmul_precision(o.precision);
    Rng init_rng(o.seed, 1), dropout_rng(o.seed, 2), data_rng(o.seed, 3);
    const ReferenceModel model = reference_model(o, init_rng, dropout_rng);
    TrainStep train_step(o, model);
    const BenchBatch first = make_batch(o.task, data_rng);
    nlohmann::ordered_json result = describe_run(o, model, first);
    if (!o.dump_initial.empty()) {
        result["loss0_eval"] = dump_initial(o, model, first);
        result["dumped"] = o.dump_initial;
    }
    const StepRecord record = run_steps(o, train_step, first, data_rng);
    result["warmup"] = o.warmup;
    result["steps"] = o.steps;
    result["losses"] = record.losses;
    result["grad_norms"] = record.grad_norms;
    if (!record.losses.empty()) result["loss0"] = record.losses[0];
    const int64_t masked = o.task == "mlm" ? first["masked_positions"].numel() : 0;
    const double flops = model_flops_per_step(o.task, masked);
    result["model_gflop_per_step"] = flops * 1e-9;
    if (!record.times.empty()) add_step_times(record.times, first, flops, result);
    if (o.steps > 0) add_matmul_share(record, o.steps, result);
    if (o.matmul_bound) add_matmul_bound(o, train_step, first, result);
    result["peak_rss_mib"] = peak_rss_mib();
    std::cout << result.dump() << std::endl;
}

// One step of each optimizer over the reference model's parameters (--task), gradients random: the
// median ms and the rate of the bytes an update must move (w, m and v read and written, g read).
void bench_optimizer(const std::string& task, int warmup, int repeats) {
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

}  // namespace hnas::bench
