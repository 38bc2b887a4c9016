#include "train/trainer.h"

#include <spdlog/spdlog.h>

#include <array>
#include <atomic>
#include <bit>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <csignal>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <new>
#include <sstream>
#include <span>
#include <thread>

#include "analysis/explain_away.h"
#include "backend/matmul.h"
#include "base/hash.h"
#include "base/number_format.h"
#include "base/read_file.h"
#include "base/system_memory.h"
#include "distributed/gradient_reducer.h"
#include "models/memory_estimate.h"
#include "models/model_io.h"
#include "optim/optimizer.h"
#include "optim/schedule.h"
#include "tasks/task.h"
#include "tasks/task_support.h"
#include "train/metrics_log.h"
#include "train/run_directory.h"
#include "train/train_schedule.h"
#include "train/train_state.h"

namespace hnas::train {

namespace fs = std::filesystem;
using config::Json;

namespace {

// ---- signals: SIGINT / SIGTERM ask the loop to checkpoint and stop --------------------------------
std::atomic<int> pending_signal{0};
extern "C" void record_signal(int signal) { pending_signal.store(signal); }

class SignalGuard {
public:
    SignalGuard() {
        pending_signal.store(0);
        previous_int_ = std::signal(SIGINT, record_signal);
        previous_term_ = std::signal(SIGTERM, record_signal);
    }
    ~SignalGuard() {
        std::signal(SIGINT, previous_int_);
        std::signal(SIGTERM, previous_term_);
    }
    SignalGuard(const SignalGuard&) = delete;
    SignalGuard& operator=(const SignalGuard&) = delete;

private:
    void (*previous_int_)(int);
    void (*previous_term_)(int);
};
// Random streams of one run, all from the config's seed.
enum Stream : uint64_t { kInitStream = 1, kDropoutStream = 2 };

// ---- before a run writes anything: data, memory, tokenizer ------------------------------------------

// One pass over every data file: damaged lines (an error, or counted under data.damaged_lines "skip")
// and training files without text are found before the run writes anything.
void check_data_files(const std::vector<tasks::DataFile>& files, const config::ExperimentConfig& config) {
    for (const tasks::DataFile& file : files) {
        TextFileScan scan;
        try {
            scan = scan_text_file(file.path, config.data.damaged_lines);
        } catch (const Error& e) {
            throw Error(file.key + ": " + e.what());
        }
        if (scan.damaged_lines > 0) {
            spdlog::warn("{}: leaving out {} damaged line(s) of {} (the first is line {})", file.key, scan.damaged_lines,
                         file.path, scan.first_damaged_line);
        }
        HNAS_CHECK(!file.training || scan.text_lines > 0, file.key, ": ", file.path, " holds no text (",
                   scan.lines, " line(s), all blank", scan.damaged_lines > 0 ? " or damaged" : "", ")");
    }
}

std::string gibibytes(int64_t bytes) { return fmt::format("{:.2f} GiB", static_cast<double>(bytes) / (1 << 30)); }

// Refuses a model and batch that cannot fit beside the other ranks on this host, before building it.
// The config keys that size a training step's memory, for the errors that say it does not fit.
std::string memory_keys(const tasks::TaskDefinition& task) {
    return fmt::format("model.d_model, model.ffn_dim, model.heads, model.encoder_layers{}, the vocabulary (tokenizer.vocab_size "
                       "or model.vocab_size), data.batch_sentences, data.batch_tokens and {}",
                       task.memory_model_keys, task.memory_data_keys);
}

void check_memory(const tasks::TaskDefinition& task, const config::ExperimentConfig& config, int64_t vocab_size,
                  int local_ranks) {
    models::ModelConfig model = config.model;
    model.vocab_size = vocab_size;
    const models::BatchShape batch = task.largest_batch(config);
    const models::MemoryEstimate estimate = models::estimate_training_memory(model, batch);
    const AvailableMemory available = available_memory();
    const int64_t needed = estimate.total_bytes() * local_ranks;
    spdlog::info("memory estimate: {} ({} parameters with gradients and optimizer moments: {}; activations of a batch "
                 "of {} x {} tokens: {}){}; {} available ({})",
                 gibibytes(needed), estimate.parameters, gibibytes(estimate.parameter_bytes), batch.rows,
                 batch.source_length, gibibytes(estimate.activation_bytes),
                 local_ranks > 1 ? fmt::format(" times {} ranks on this host", local_ranks) : std::string(),
                 gibibytes(available.bytes), available.source);
    // Measured peaks on the bundled configs ran 1.05-2.1x the estimate (docs: README, "When something
    // goes wrong"): the allocator's pool and the backward pass's gradients come on top.
    if (needed <= available.bytes) {
        if (2 * needed > available.bytes) spdlog::warn("memory: the peak may exceed what is available (peaks reach twice the estimate)");
        return;
    }
    throw Error(fmt::format(
        "train: this model and batch need about {} ({} parameters with gradients and optimizer moments: {}; "
        "activations of a batch of {} rows x {} tokens: {}){}, but {} is available ({}); the size is driven by {}",
        gibibytes(needed), estimate.parameters, gibibytes(estimate.parameter_bytes), batch.rows, batch.source_length,
        gibibytes(estimate.activation_bytes),
        local_ranks > 1 ? fmt::format(" for each of {} ranks on this host", local_ranks) : std::string(),
        gibibytes(available.bytes), available.source, memory_keys(task)));
}

// The tokenizer file a config names: a SentencePiece model or a WordPiece vocab.txt.
data::Tokenizer load_tokenizer(const config::TokenizerConfig& tokenizer) {
    return tokenizer.type == data::TokenizerType::wordpiece ? data::Tokenizer::load_wordpiece(tokenizer.model) : data::Tokenizer::load(tokenizer.model);
}

// The checkpoint whose tokenizer a run uses instead of training one: the one it resumes from, else the
// one it is initialized from (a pretrained encoder keeps its vocabulary), unless tokenizer.model is set.
const io::Checkpoint* tokenizer_checkpoint(const config::ExperimentConfig& config, const std::optional<io::Checkpoint>& resumed,
                                           const std::optional<io::Checkpoint>& pretrained) {
    if (resumed) return &*resumed;
    if (config.tokenizer.model.empty() && pretrained) return &*pretrained;
    return nullptr;
}

// The vocabulary size the run will have, known without training a tokenizer.
int64_t expected_vocab_size(const config::ExperimentConfig& config, const io::Checkpoint* tokenizer_source) {
    if (config.model.vocab_size > 0) return config.model.vocab_size;
    if (tokenizer_source) return data::Tokenizer::from_serialized(tokenizer_source->bytes("tokenizer.model")).vocab_size();
    if (!config.tokenizer.model.empty()) return load_tokenizer(config.tokenizer).vocab_size();
    return config.tokenizer.vocab_size;
}

// A tokenizer trained from the data for a new run: trained in a temporary folder, so that nothing
// reaches the run directory before the run starts (RunTokenizer::files are written then).
struct RunTokenizer {
    data::Tokenizer tokenizer;
    std::vector<std::pair<std::string, std::string>> files;  // name in the run directory, contents
};

RunTokenizer train_run_tokenizer(const std::vector<tasks::DataFile>& files, const config::ExperimentConfig& config) {
    data::TokenizerTrainOptions options;
    options.inputs = config.tokenizer.inputs;
    if (options.inputs.empty()) {
        for (const tasks::DataFile& file : files) {
            if (file.training) options.inputs.push_back(file.path);
        }
    }
    HNAS_CHECK(!options.inputs.empty(), "train: task ", name_of(config.task), " has no text files to train a ",
               "tokenizer on; set tokenizer.model, tokenizer.inputs or init_from (a pretrained model brings its tokenizer)");
    std::string folder_template = (fs::temp_directory_path() / "hnas-tokenizer-XXXXXX").string();
    HNAS_CHECK(::mkdtemp(folder_template.data()) != nullptr, "train: cannot create a temporary folder in ",
               fs::temp_directory_path().string(), " for the tokenizer: ", std::strerror(errno));
    const fs::path folder(folder_template);
    struct RemoveFolder {
        fs::path path;
        ~RemoveFolder() {
            std::error_code ignored;
            fs::remove_all(path, ignored);
        }
    } remove_folder{folder};
    options.model_prefix = (folder / "tokenizer").string();
    options.vocab_size = config.tokenizer.vocab_size;
    options.type = config.tokenizer.type;
    options.input_sentence_size = config.tokenizer.input_sentence_size;
    options.seed = config.seed;
    options.damaged_lines = config.data.damaged_lines;
    spdlog::info("training a {} tokenizer of {} pieces on {} file(s)", name_of(options.type), options.vocab_size, options.inputs.size());
    data::train_tokenizer(options);
    RunTokenizer result{data::Tokenizer::load(options.model_prefix + ".model"), {}};
    result.files = {{"tokenizer.model", result.tokenizer.serialized_model()},
                    {"tokenizer.vocab", read_file(options.model_prefix + ".vocab", "the trained tokenizer's vocabulary")}};
    return result;
}
// Every leaf of a JSON object as path -> value, for logging config differences on resume.
void flatten(const Json& value, const std::string& path, std::map<std::string, Json>& out) {
    if (value.is_object()) {
        for (const auto& [key, child] : value.items()) flatten(child, path.empty() ? key : path + "." + key, out);
    } else {
        out[path] = value;
    }
}

void log_config_differences(const Json& saved, const Json& current) {
    std::map<std::string, Json> before, after;
    flatten(saved, "", before);
    flatten(current, "", after);
    for (const auto& [path, value] : after) {
        const auto found = before.find(path);
        if (found == before.end()) {
            spdlog::warn("resume: config option {} = {} is new (not in the checkpoint)", path, value.dump());
        } else if (found->second != value) {
            spdlog::warn("resume: config option {} changed from {} to {}", path, found->second.dump(), value.dump());
        }
    }
    for (const auto& [path, value] : before) {
        if (!after.count(path)) spdlog::warn("resume: config option {} = {} was dropped", path, value.dump());
    }
}

// The name and element of the first non-finite gradient, or "" when all are finite.
std::string first_non_finite_gradient(const std::vector<nn::NamedParameter>& parameters) {
    for (const auto& named : parameters) {
        const Tensor grad = named.parameter.grad();
        if (!grad.defined()) continue;
        for (int64_t i = 0; i < grad.numel(); ++i) {
            if (!std::isfinite(grad.data()[i])) return named.name + " (element " + std::to_string(i) + ")";
        }
    }
    return "";
}

// A hash of every parameter's bits: data-parallel ranks compare theirs with rank 0's.
std::string parameter_fingerprint(const std::vector<nn::NamedParameter>& parameters) {
    uint64_t hash = 0;
    for (const auto& named : parameters) {
        const Tensor& value = named.parameter.value();
        for (int64_t i = 0; i < value.numel(); ++i) hash = hash_combine(hash, std::bit_cast<uint32_t>(value.data()[i]));
    }
    return std::to_string(hash);
}

// Under data parallelism each rank gets its share of the cores; otherwise train.threads, if set.
void configure_threads(const config::ExperimentConfig& config, const distributed::Communicator& world) {
    if (world.size() > 1) {
        // An explicit OMP_NUM_THREADS counts as a request, like train.threads.
        const int requested = config.train.threads > 0                 ? config.train.threads
                              : std::getenv("OMP_NUM_THREADS") != nullptr ? backend::num_threads()
                                                                          : 0;
        backend::set_num_threads(distributed::threads_per_rank(requested, world.local_size()));
        spdlog::info("data-parallel over {} ranks ({} on this host of {} cores): {} OpenMP thread(s) per rank{}",
                     world.size(), world.local_size(), std::thread::hardware_concurrency(), backend::num_threads(),
                     requested > backend::num_threads() ? fmt::format(" (not the {} requested: the cores would be oversubscribed)", requested)
                                                        : std::string());
    } else if (config.train.threads > 0) {
        backend::set_num_threads(config.train.threads);
    }
    backend::set_matmul_precision(config.train.precision);
}

// The config with what the task fills in from the data.
config::ExperimentConfig completed(const config::ExperimentConfig& config) {
    config::ExperimentConfig complete = config;
    const tasks::TaskDefinition& definition = tasks::task_definition(config.task);
    if (definition.complete_config) definition.complete_config(complete);
    return complete;
}

// One run of `hnas train`: the constructor does everything up to the first step (checks, tokenizer,
// task, run directory, resumed or initial state); run() is the loop.
class Trainer {
public:
    Trainer(const config::ExperimentConfig& config, const TrainOptions& options);
    TrainResult run();

private:
    void start();
    double train_step(double& grad_norm, double& learning_rate);
    void log_progress(double grad_norm, double learning_rate);
    bool validate();  // false when patience ran out
    Json attention_diagnostics() const;
    Json memory_record() const;
    Json profile_record() const;
    Error out_of_memory(const std::string& what) const;
    io::CheckpointWriter checkpoint_writer() const;
    void save_step_checkpoint();
    void check_replicas() const;
    void log_stop(StopReason reason) const;

    using Clock = std::chrono::steady_clock;

    const config::ExperimentConfig config_;  // completed by the task (e.g. the labels of a classification file)
    const TrainOptions& options_;
    const tasks::TaskDefinition& definition_;
    RunDirectory run_;
    std::unique_ptr<distributed::Communicator> own_communicator_;
    distributed::Communicator& world_;
    const bool distributed_, leader_;
    std::optional<io::Checkpoint> resumed_, pretrained_;
    std::optional<RunTokenizer> tokenizer_;  // set by start()
    config::ExperimentConfig run_config_;  // the config with the vocabulary size filled in
    Rng init_rng_, dropout_rng_;
    std::unique_ptr<tasks::Task> task_;
    std::vector<nn::NamedParameter> parameters_;
    std::unique_ptr<optim::Optimizer> optimizer_;
    std::optional<distributed::GradientReducer> reducer_;
    TrainState state_;
    MetricsLog metrics_;
    optim::ScheduleOptions learning_rate_;
    // The progress window since the last log line.
    Clock::time_point start_time_, window_start_;
    double window_loss_ = 0.0;
    int64_t window_steps_ = 0, first_step_ = 0;
    int64_t window_targets_ = 0, window_input_tokens_ = 0;  // BatchTokens::global and ::input
    double window_backward_ = 0.0;       // seconds in backward passes (recorded for data-parallel runs)
    double window_gradient_wait_ = 0.0;  // seconds from the end of backward until every rank has the sums
    double last_loss_ = 0.0;
    models::DiagnosticForward diagnostic_forward_;  // over the inputs the diagnostics measure; empty: none
};

Trainer::Trainer(const config::ExperimentConfig& config, const TrainOptions& options)
    : config_(completed(config)),
      options_(options),
      definition_(tasks::task_definition(config.task)),
      run_(options.run_dir),
      own_communicator_(options.communicator ? nullptr : distributed::single_process()),
      world_(options.communicator ? *options.communicator : *own_communicator_),
      distributed_(world_.size() > 1),
      leader_(world_.rank() == 0),
      run_config_(config_),
      init_rng_(config_.seed, kInitStream),
      dropout_rng_(config_.seed, kDropoutStream) {
    configure_threads(config_, world_);
    spdlog::info("hnas {} on {}; {} matmuls; run directory {}", HNAS_VERSION, backend::describe(),
                 name_of(config_.train.precision), run_.root().string());
    start();
}

// Rank 0 owns the run directory; the other ranks read from it only when resuming. Everything is
// checked before the first file is written, so a failed start leaves nothing behind.
void Trainer::start() {
    const fs::path checkpoint_dir = run_.checkpoint_dir();
    const std::vector<tasks::DataFile> files = definition_.data_files(config_);
    std::string resume_path;
    if (!options_.resume && !config_.init_from.empty()) pretrained_ = io::Checkpoint::load(config_.init_from);
    if (leader_) {
        if (options_.resume) {
            HNAS_CHECK(fs::is_directory(checkpoint_dir), "train --resume: ", checkpoint_dir.string(), " does not exist");
            resumed_ = run_.load_newest_checkpoint();
            resume_path = resumed_->path();
        } else {
            HNAS_CHECK(run_.step_checkpoints().empty(), "train: ", checkpoint_dir.string(),
                       " already holds checkpoints; pass --resume to continue that run or choose another --out");
        }
        std::vector<tasks::DataFile> checked = files;
        if (config_.tokenizer.model.empty() && !tokenizer_checkpoint(config_, resumed_, pretrained_) && !definition_.fixed_tokenizer) {
            for (size_t i = 0; i < config_.tokenizer.inputs.size(); ++i) {
                checked.push_back({fmt::format("tokenizer.inputs[{}]", i), config_.tokenizer.inputs[i], true});
            }
        }
        check_data_files(checked, config_);
        const int64_t vocab_size = definition_.fixed_tokenizer
                                       ? definition_.fixed_tokenizer(config_).vocab_size()
                                       : expected_vocab_size(config_, tokenizer_checkpoint(config_, resumed_, pretrained_));
        check_memory(definition_, config_, vocab_size, world_.local_size());
    }
    if (options_.resume) {
        world_.broadcast(resume_path, "setup: the checkpoint to resume from");
        if (!leader_) resumed_ = io::Checkpoint::load(resume_path);
        spdlog::info("resuming from {} (written by {} rank(s))", resumed_->path(), resumed_->metadata().value("ranks", 1));
        if (leader_) log_config_differences(resumed_->metadata().at("config"), config_.resolved);
    }

    tokenizer_ = [&] {
        if (definition_.fixed_tokenizer) return RunTokenizer{definition_.fixed_tokenizer(config_), {}};
        if (const io::Checkpoint* source = tokenizer_checkpoint(config_, resumed_, pretrained_)) {
            return RunTokenizer{data::Tokenizer::from_serialized(source->bytes("tokenizer.model")), {}};
        }
        if (!config_.tokenizer.model.empty()) return RunTokenizer{load_tokenizer(config_.tokenizer), {}};
        if (!distributed_) return train_run_tokenizer(files, config_);
        // Only rank 0 trains the tokenizer; the others receive its model.
        if (leader_) {
            RunTokenizer trained = train_run_tokenizer(files, config_);
            std::string model = trained.tokenizer.serialized_model();
            world_.broadcast(model, "setup: the tokenizer");
            return trained;
        }
        std::string model;
        world_.broadcast(model, "setup: the tokenizer");
        return RunTokenizer{data::Tokenizer::from_serialized(model), {}};
    }();
    if (run_config_.model.vocab_size == 0) run_config_.model.vocab_size = tokenizer_->tokenizer.vocab_size();
    HNAS_CHECK(run_config_.model.vocab_size == tokenizer_->tokenizer.vocab_size(), "train: model.vocab_size is ",
               run_config_.model.vocab_size, " but the tokenizer has ", tokenizer_->tokenizer.vocab_size(), " pieces");

    task_ = definition_.create(run_config_, tokenizer_->tokenizer, init_rng_, dropout_rng_);
    // The run starts: its directory and first files appear only now.
    if (leader_) {
        run_.create();
        if (!resumed_) {
            run_.write_file("config.json", config_.resolved.dump(2) + "\n");
            for (const auto& [name, contents] : tokenizer_->files) run_.write_file(name, contents);
        }
        metrics_ = MetricsLog(run_.root() / "metrics.jsonl", resumed_.has_value());
    }
    models::Model& model = task_->model();
    parameters_ = model.named_parameters();
    spdlog::info("model: {} parameters; vocabulary {}", model.parameter_count(), run_config_.model.vocab_size);
    optimizer_ = std::make_unique<optim::Optimizer>(parameters_, config_.train.optimizer);

    if (resumed_) {
        state_ = load_state(resumed_->metadata());
        models::load_parameters(*resumed_, model);
        if (options_.reset_optimizer) {
            spdlog::warn("resume: optimizer moments reset (--reset-optimizer)");
            state_.optimizer_steps = 0;
        } else {
            optimizer_->load(*resumed_, state_.optimizer_steps);
        }
        if (options_.reset_schedule) {
            state_.schedule_offset = state_.step;
            spdlog::warn("resume: learning-rate schedule restarts at step {} (--reset-schedule)", state_.step);
        }
        dropout_rng_.set_state(state_.dropout_rng);
        task_->restore(state_.data_position);
    } else if (pretrained_) {
        const models::InitReport report = task_->initialize_from(*pretrained_);
        for (const auto& [from, to] : report.mapped) spdlog::info("init_from: {} <- {}", to, from);
        for (const auto& name : report.fresh) spdlog::info("init_from: {} fresh", name);
        for (const auto& name : report.unused) spdlog::info("init_from: {} unused", name);
        pretrained_.reset();
    }
    learning_rate_ = config_.train.schedule;
    learning_rate_.total_steps = config_.train.steps - state_.schedule_offset;
    if (distributed_) {
        reducer_.emplace(parameters_, distributed::GradientReducer::kBucketFloats, config_.train.bf16_gradient_sums);
    }
    check_replicas();
    std::vector<std::vector<int32_t>> diagnostic_rows;
    for (const std::string& text : task_->diagnostic_texts()) {
        diagnostic_rows.push_back(analysis::encoder_input(run_config_, tokenizer_->tokenizer, text));
    }
    diagnostic_forward_ = diagnostic_rows.empty() ? task_->diagnostic_forward()
                                                  : analysis::encoder_forward(task_->model(), std::move(diagnostic_rows),
                                                                              analysis::ExplainAwayOptions{}.batch);
}

TrainResult Trainer::run() {
    SignalGuard signals;
    const TrainSchedule schedule(config_, state_.step, options_.stop_after_steps);
    start_time_ = window_start_ = Clock::now();
    first_step_ = state_.step;
    std::optional<StopReason> stop;
    while (!stop && !schedule.finished(state_.step)) {
        double grad_norm = 0.0, learning_rate = 0.0;
        double loss = 0.0;
        try {
            loss = train_step(grad_norm, learning_rate);
        } catch (const AllocationError& e) {
            throw out_of_memory(e.what());
        } catch (const std::bad_alloc&) {
            throw out_of_memory("an allocation outside the tensors failed");
        }
        window_loss_ += loss;
        ++window_steps_;
        last_loss_ = loss;
        if (leader_ && schedule.log_due(state_.step)) log_progress(grad_norm, learning_rate);
        const bool patience_left = !(leader_ && schedule.validation_due(state_.step)) || validate();
        if (schedule.checkpoint_due(state_.step)) save_step_checkpoint();
        // All ranks stop at the same step: rank 0 alone decides early stopping, and a signal may reach
        // the ranks during different steps.
        std::array<double, 2> votes{patience_left ? 0.0 : 1.0, pending_signal.load() != 0 ? 1.0 : 0.0};
        if (distributed_) world_.sum(votes, fmt::format("step {}: stop?", state_.step));
        stop = schedule.stop(state_.step, votes[0] > 0.0, votes[1] > 0.0);
    }
    const StopReason reason = stop.value_or(StopReason::completed);
    log_stop(reason);
    if (leader_ && schedule.final_validation_due(state_.step, reason)) validate();
    if (schedule.final_checkpoint_due(state_.step)) save_step_checkpoint();
    return {state_.step, last_loss_, state_.best_metric, reason, reason == StopReason::signal ? pending_signal.load() : 0};
}

void Trainer::log_stop(StopReason reason) const {
    switch (reason) {
        case StopReason::completed: return;
        case StopReason::early_stopping:
            spdlog::info("early stopping: no improvement in {} validations", config_.validation.patience);
            return;
        case StopReason::stop_after:
            spdlog::info("stopping after {} steps of this run (--stop-after)", options_.stop_after_steps);
            return;
        case StopReason::signal: {
            const int signal = pending_signal.load();
            spdlog::warn("{}: writing a checkpoint and stopping",
                         signal != 0 ? fmt::format("received signal {}", signal) : "another rank received a signal");
            return;
        }
    }
}

// One optimizer step over train.gradient_accumulation micro-batches; returns the step's loss (the
// mean over the global batches' loss-bearing tokens).
double Trainer::train_step(double& grad_norm, double& learning_rate) {
    int64_t& step = state_.step;
    ++step;
    // Each rank's dropout masks must differ from the others'. The stream is derived from (step, rank)
    // rather than carried, so a checkpoint needs no per-rank state and resumes on any number of ranks.
    // (Masks drawn for a slice of the batch cannot equal the single process's masks of those rows;
    // docs/distributed.md.)
    if (distributed_) dropout_rng_ = Rng(config_.seed, hash_combine(hash_combine(kDropoutStream, step), world_.rank()));
    optimizer_->zero_grad();
    double step_loss = 0.0;
    const int64_t micro_batches = config_.train.gradient_accumulation;
    const float micro_weight = 1.0f / static_cast<float>(micro_batches);
    for (int64_t micro = 0; micro < micro_batches; ++micro) {
        const tasks::BatchTokens tokens = task_->next_batch(world_.rank(), world_.size());
        window_targets_ += tokens.global;
        window_input_tokens_ += tokens.input;
        // The last backward pass of the step starts the gradient sums as its gradients become final.
        const bool sums_overlap = distributed_ && micro + 1 == micro_batches;
        if (sums_overlap) reducer_->begin(world_, fmt::format("step {}: gradients", step));
        if (tokens.shard == 0) continue;  // fewer rows than ranks: this rank adds nothing to the sums
        Var loss = task_->batch_loss();
        const float value = loss.item();
        HNAS_CHECK(std::isfinite(value), "step ", step, ": the loss is ", value, "; stopping without a checkpoint ",
                   "(the last good one is in ", run_.checkpoint_dir().string(), ")");
        step_loss += value / static_cast<double>(micro_batches);
        const auto backward_start = Clock::now();
        loss.backward(Tensor::full({}, micro_weight), sums_overlap ? reducer_->hooks() : BackwardHooks{});
        window_backward_ += std::chrono::duration<double>(Clock::now() - backward_start).count();
    }
    if (distributed_) {
        // The wait runs until every rank has the sums: the loss sum after them returns only then.
        const auto wait_start = Clock::now();
        reducer_->finish();
        world_.sum(std::span<double>(&step_loss, 1), fmt::format("step {}: loss", step));
        window_gradient_wait_ += std::chrono::duration<double>(Clock::now() - wait_start).count();
    }
    const optim::GradientClip clip = optim::clip_factors(parameters_, config_.train.clip_norm, config_.train.clip_scope);
    grad_norm = clip.norm;
    if (!std::isfinite(grad_norm)) {
        throw Error("step " + std::to_string(step) + ": non-finite gradient in " + first_non_finite_gradient(parameters_) +
                    "; stopping without a checkpoint (the last good one is in " + run_.checkpoint_dir().string() + ")");
    }
    learning_rate = optim::learning_rate_at(learning_rate_, step - state_.schedule_offset);
    optimizer_->step(static_cast<float>(learning_rate), clip.factors);
    return step_loss;
}

void Trainer::log_progress(double grad_norm, double learning_rate) {
    const int64_t step = state_.step;
    const auto now = Clock::now();
    const double elapsed = std::chrono::duration<double>(now - start_time_).count();
    const double window = std::chrono::duration<double>(now - window_start_).count();
    // Two throughputs, each naming what it counts: the tokens the model reads (as hnas-bench counts)
    // and the targets the loss averages over (target tokens, masked tokens, examples or windows).
    const double input_tokens_per_second = static_cast<double>(window_input_tokens_) / std::max(window, 1e-9);
    const double targets_per_second = static_cast<double>(window_targets_) / std::max(window, 1e-9);
    const double eta = elapsed / static_cast<double>(step - first_step_) * static_cast<double>(config_.train.steps - step);
    const double loss = window_loss_ / static_cast<double>(window_steps_);
    const data::DataPosition position = task_->position();
    const Json memory = memory_record();
    // Data-parallel runs: the part of the gradient sums the backward pass did not hide.
    const std::string gradient_wait =
        distributed_ ? fmt::format("  gradient wait {:.0f} ms/step", portable(1e3 * window_gradient_wait_ / static_cast<double>(window_steps_)))
                     : "";
    spdlog::info("step {:>7}/{}  epoch {}  loss {:.4f}  lr {:.3e}  |g| {:.3f}  {:.0f} input tok/s  {:.0f} {}/s  rss {}  elapsed {}  eta {}{}",
                 step, config_.train.steps, position.epoch, portable(loss), portable(learning_rate), portable(grad_norm),
                 portable(input_tokens_per_second), portable(targets_per_second), definition_.target_unit,
                 gibibytes(memory["rss"].get<int64_t>()), format_duration(elapsed), format_duration(eta), gradient_wait);
    // Every hybrid weight u per layer and head (hnas attention), for the paper's Fig. 3 over training.
    Json hybrid_u = Json::object();
    for (const auto& [name, attention] : task_->model().attentions()) {
        for (const auto& values : attention->head_values()) {
            if (values.name == "u") hybrid_u[name] = values.values;
        }
    }
    Json record = {{"step", step},
                   {"epoch", position.epoch},
                   {"loss", loss},
                   {"learning_rate", learning_rate},
                   {"grad_norm", grad_norm},
                   {"input_tokens_per_second", input_tokens_per_second},
                   {"targets_per_second", targets_per_second},
                   {"target_unit", definition_.target_unit},
                   {"elapsed_seconds", elapsed},
                   {"memory", memory},
                   {"profile", profile_record()},
                   {"hybrid_u", hybrid_u}};
    if (distributed_) {
        const auto steps = static_cast<double>(window_steps_);
        record["distributed"] = {{"backward_seconds_per_step", window_backward_ / steps},
                                 {"gradient_wait_seconds_per_step", window_gradient_wait_ / steps},
                                 {"buckets", reducer_->buckets()},
                                 {"gradient_floats", reducer_->floats()},
                                 {"gradient_floats_last_bucket", reducer_->last_bucket_floats()}};
    }
    metrics_.write(record);
    window_start_ = now;
    window_loss_ = window_backward_ = window_gradient_wait_ = 0.0;
    window_steps_ = window_targets_ = window_input_tokens_ = 0;
}

// Logs and records the validation, keeps best.ckpt; returns false when patience ran out. validation.metric
// "loss" is better lower, every other metric higher.
bool Trainer::validate() {
    const int64_t step = state_.step;
    const auto result = task_->validate();
    if (!result) {
        spdlog::info("step {}: no validation data", step);
        return true;
    }
    Json record = {{"step", step}, {"validation_loss", result->loss}, {"validation_perplexity", std::exp(result->loss)}};
    std::string metrics_text;
    for (const tasks::Metric& metric : result->metrics) {
        if (metric.name == "loss") continue;
        record["validation_" + metric.name] = metric.value;
        metrics_text += fmt::format("  {} {:.2f}", metric.name, portable(100.0 * metric.value));
    }
    const bool higher_is_better = config_.validation.metric != "loss";
    const double metric = result->metric(config_.validation.metric);
    const bool improved = !state_.best_metric || (higher_is_better ? metric > *state_.best_metric : metric < *state_.best_metric);
    if (improved) {
        state_.best_metric = metric;
        state_.stale_validations = 0;
    } else {
        ++state_.stale_validations;
    }
    record["best_metric"] = *state_.best_metric;
    record["memory"] = memory_record();
    if (diagnostic_forward_) record["diagnostics"] = attention_diagnostics();
    metrics_.write(record);
    spdlog::info("validation at step {}: loss {:.4f}  perplexity {:.2f}{}{}", step, portable(result->loss),
                 portable(std::exp(result->loss)), metrics_text, improved ? "  (best)" : "");
    if (improved) run_.write_best_checkpoint(checkpoint_writer());
    return config_.validation.patience == 0 || state_.stale_validations < config_.validation.patience;
}

// A failed allocation in a training step, as the error that ends the run: what failed, what the process
// holds, the config keys that size a step, and where the run resumes from (issue #24).
Error Trainer::out_of_memory(const std::string& what) const {
    return Error(fmt::format("train: step {}: out of memory: {} (process RSS {}); the size is driven by {}. The last "
                             "checkpoint in {} resumes the run.",
                             state_.step + 1, what, gibibytes(process_memory().rss),
                             memory_keys(tasks::task_definition(config_.task)), run_.checkpoint_dir().string()));
}

// Where the memory is at a progress line or a validation (issue #24), in bytes: the peak of bytes in
// live tensors since the previous such record (then reset) and now, the tensor pool's segments, what
// malloc's heap holds in use and keeps free, and the process's resident memory now and at its peak.
Json Trainer::memory_record() const {
    const TensorMemory tensors = tensor_memory();
    reset_tensor_memory_peak();
    const HeapMemory heap = heap_memory();
    const ProcessMemory process = process_memory();
    return {{"tensor_live_peak", tensors.peak_live}, {"tensor_live", tensors.live}, {"tensor_reserved", tensors.reserved}, {"heap_in_use", heap.in_use},
            {"heap_free", heap.free}, {"rss", process.rss}, {"peak_rss", process.peak_rss}};
}

// What the process has spent since it started, for comparing a real run with the bench (issue #24,
// docs/performance.md): fresh pages mapped in, and the matmuls' calls, FLOPs and seconds with the
// primitives their shapes needed and the seconds creating them took.
Json Trainer::profile_record() const {
    const backend::MatmulStats matmuls = backend::matmul_stats();
    return {{"minor_faults", process_memory().minor_faults}, {"matmul_calls", matmuls.calls}, {"matmul_flops", matmuls.flops},
            {"matmul_seconds", matmuls.seconds}, {"matmul_primitives", matmuls.primitives},
            {"matmul_creation_seconds", matmuls.creation_seconds}};
}

// The papers' diagnostics on a fixed validation batch (issue #16), per bidirectional attention and head:
// the smallest per-key weight sum min_j Σ_i A_ij (paper 000 Fig. 1 follows it over training), its ratio
// to Lemma 1's bound 1/L, the share of keys below ε, and the histogram of ln Σ_i A_ij down to e^-40
// (paper 004 Fig. 1); and each hnas layer's head-averaged u.
Json Trainer::attention_diagnostics() const {
    models::Model& model = task_->model();
    const tasks::EvaluationMode evaluation(model);
    const analysis::ExplainAwayReport report = analysis::measure_key_weights(model, diagnostic_forward_, {});
    Json attentions = Json::object();
    for (const analysis::AttentionKeyWeights& attention : report.attentions) {
        Json entry = {{"kind", attention.kind}};
        for (const analysis::HeadKeyWeights& head : attention.heads) {
            entry["min_sum"].push_back(head.min_sum);
            entry["min_ratio"].push_back(head.min_ratio);
            entry["fraction_below_epsilon"].push_back(static_cast<double>(head.below_epsilon) /
                                                      static_cast<double>(std::max<int64_t>(head.keys, 1)));
            entry["ln_histogram"].push_back(head.histogram);
            entry["below_range"].push_back(head.below_range);
            entry["negative"].push_back(head.negative);
        }
        attentions[attention.name] = std::move(entry);
    }
    Json hybrid_u_mean = Json::object();
    for (const auto& [name, attention] : model.attentions()) {
        for (const auto& values : attention->head_values()) {
            if (values.name != "u" || values.values.empty()) continue;
            double sum = 0.0;
            for (const double u : values.values) sum += u;
            hybrid_u_mean[name] = sum / static_cast<double>(values.values.size());
        }
    }
    return {{"sequences", report.sequences},
            {"epsilon", report.options.epsilon},
            {"ln_low", report.options.ln_low},
            {"ln_high", report.options.ln_high},
            {"attentions", attentions},
            {"hybrid_u_mean", hybrid_u_mean}};
}

// Everything a resumed run needs.
io::CheckpointWriter Trainer::checkpoint_writer() const {
    TrainState state = state_;
    state.optimizer_steps = optimizer_->steps_taken();
    state.dropout_rng = dropout_rng_.state();
    state.data_position = task_->position();
    Json metadata = {{"hnas_version", HNAS_VERSION},
                     {"ranks", world_.size()},
                     {"config", config_.resolved},
                     {"vocab_size", run_config_.model.vocab_size}};
    save_state(state, metadata);
    io::CheckpointWriter writer(metadata);
    models::add_parameters(writer, task_->model());
    optimizer_->save(writer);
    writer.add_bytes("tokenizer.model", tokenizer_->tokenizer.serialized_model());
    return writer;
}

// Every rank holds the same parameters (the same start, the same summed gradients, the same step):
// checked before each checkpoint, which rank 0 writes for all.
void Trainer::save_step_checkpoint() {
    check_replicas();
    if (!leader_) return;
    const fs::path path = run_.write_step_checkpoint(state_.step, checkpoint_writer(), config_.checkpoint.keep);
    spdlog::info("checkpoint {}", path.string());
}

void Trainer::check_replicas() const {
    if (!distributed_) return;
    const std::string mine = parameter_fingerprint(parameters_);
    std::string leaders = mine;
    world_.broadcast(leaders, fmt::format("step {}: parameter check", state_.step));
    HNAS_CHECK(mine == leaders, "step ", state_.step, ": rank ", world_.rank(), "'s parameters differ from rank 0's");
}

}  // namespace

TrainResult train(const config::ExperimentConfig& config, const TrainOptions& options) {
    return Trainer(config, options).run();
}

}  // namespace hnas::train
