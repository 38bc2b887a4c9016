#include "train/trainer.h"

#include <spdlog/spdlog.h>

#include <array>
#include <chrono>
#include <cmath>
#include <filesystem>
#include <new>
#include <span>

#include "backend/matmul.h"
#include "base/hash.h"
#include "base/number_format.h"
#include "distributed/gradient_reducer.h"
#include "models/model_io.h"
#include "optim/optimizer.h"
#include "optim/schedule.h"
#include "tasks/task.h"
#include "tasks/trained_model.h"
#include "train/metrics_log.h"
#include "train/parameter_checks.h"
#include "train/preflight.h"
#include "train/progress_window.h"
#include "train/run_directory.h"
#include "train/run_records.h"
#include "train/signals.h"
#include "train/train_schedule.h"
#include "train/train_state.h"
#include "train/vocabulary.h"

namespace hnas::train {

namespace fs = std::filesystem;
using config::Json;

namespace {

// Random streams of one run, all from the config's seed.
enum Stream : uint64_t { kInitStream = 1, kDropoutStream = 2 };

// One run of `hnas train`: the constructor does everything up to the first step (checks, tokenizer,
// task, run directory, resumed or initial state); run() is the loop.
class Trainer {
public:
    Trainer(const config::ExperimentConfig& config, const TrainOptions& options);
    TrainResult run();

private:
    void start();
    void check_before_writing(const std::vector<tasks::DataFile>& files);
    void share_resumed_checkpoint();
    RunTokenizer choose_tokenizer(const std::vector<tasks::DataFile>& files);
    void create_run_directory();
    void initialize_from_pretrained();
    void start_observers();
    io::CheckpointWriter save_checkpoint() const;
    void restore_checkpoint(const io::Checkpoint& checkpoint);
    tasks::BatchTokens batch_counts(tasks::BatchTokens tokens, int64_t step);
    double train_step(double& grad_norm, double& learning_rate);
    void log_progress(double grad_norm, double learning_rate);
    bool validate();  // false when patience ran out
    void save_step_checkpoint();
    void check_replicas() const;

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
    ProgressWindow progress_;  // since the last progress line
};

Trainer::Trainer(const config::ExperimentConfig& config, const TrainOptions& options)
    : config_(tasks::completed_config(config)),
      options_(options),
      definition_(tasks::task_definition(*config.task)),
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

// Everything up to the first step. Rank 0 owns the run directory; the other ranks read from it only when
// resuming. Everything is checked before the first file is written, so a failed start leaves nothing behind.
void Trainer::start() {
    const std::vector<tasks::DataFile> files = definition_.data_files(config_);
    if (!options_.resume && !config_.init_from.empty()) pretrained_ = io::Checkpoint::load(config_.init_from);
    if (leader_) check_before_writing(files);
    if (options_.resume) share_resumed_checkpoint();
    tokenizer_ = choose_tokenizer(files);
    if (run_config_.model.vocab_size == 0) run_config_.model.vocab_size = tokenizer_->tokenizer.vocab_size();
    HNAS_CHECK(run_config_.model.vocab_size == tokenizer_->tokenizer.vocab_size(), "train: model.vocab_size is ",
               run_config_.model.vocab_size, " but the tokenizer has ", tokenizer_->tokenizer.vocab_size(), " pieces");
    task_ = definition_.create(run_config_, tokenizer_->tokenizer, init_rng_, dropout_rng_);
    if (pretrained_) initialize_from_pretrained();
    create_run_directory();
    parameters_ = task_->model().named_parameters();
    spdlog::info("model: {} parameters; vocabulary {}", task_->model().parameter_count(), run_config_.model.vocab_size);
    optimizer_ = std::make_unique<optim::Optimizer>(parameters_, config_.train.optimizer);
    if (resumed_) restore_checkpoint(*resumed_);
    learning_rate_ = config_.train.schedule;
    learning_rate_.total_steps = config_.train.steps - state_.schedule_offset;
    if (distributed_) reducer_.emplace(parameters_, distributed::GradientReducer::kBucketFloats, config_.train.bf16_gradient_sums);
    check_replicas();
    start_observers();
}

// Rank 0: the checkpoint to resume from (or that there is none to overwrite), the data files, and the
// memory the model and its largest batch need.
void Trainer::check_before_writing(const std::vector<tasks::DataFile>& files) {
    const fs::path checkpoint_dir = run_.checkpoint_dir();
    if (options_.resume) {
        HNAS_CHECK(fs::is_directory(checkpoint_dir), "train --resume: ", checkpoint_dir.string(), " does not exist");
        resumed_ = run_.load_newest_checkpoint();
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
    for (const std::string& warning : trust_ratio_warnings(config_)) spdlog::warn("config: {}", warning);
    const PlannedVocabulary vocabulary = planned_vocabulary(definition_, config_, tokenizer_checkpoint(config_, resumed_, pretrained_));
    check_memory(definition_, config_, vocabulary.size, world_.local_size());
}

// Every rank loads the checkpoint rank 0 chose to resume from.
void Trainer::share_resumed_checkpoint() {
    std::string path = leader_ ? resumed_->path() : std::string();
    world_.broadcast(path, "setup: the checkpoint to resume from");
    if (!leader_) resumed_ = io::Checkpoint::load(path);
    spdlog::info("resuming from {} (written by {} rank(s))", resumed_->path(), resumed_->metadata().value("ranks", 1));
    if (leader_) log_config_differences(resumed_->metadata().at("config"), config_.resolved);
}

// The task's own tokenizer, else the one of the checkpoint resumed or started from, else the config's
// file, else one trained from the data (by rank 0, which hands it to the others).
RunTokenizer Trainer::choose_tokenizer(const std::vector<tasks::DataFile>& files) {
    if (definition_.fixed_tokenizer) return RunTokenizer{definition_.fixed_tokenizer(config_), {}};
    if (const io::Checkpoint* source = tokenizer_checkpoint(config_, resumed_, pretrained_)) {
        return RunTokenizer{data::Tokenizer::from_serialized(source->bytes("tokenizer.model")), {}};
    }
    if (!config_.tokenizer.model.empty()) return RunTokenizer{load_tokenizer(config_.tokenizer), {}};
    if (!distributed_) return train_run_tokenizer(files, config_);
    if (leader_) {
        RunTokenizer trained = train_run_tokenizer(files, config_);
        std::string model = trained.tokenizer.serialized_model();
        world_.broadcast(model, "setup: the tokenizer");
        return trained;
    }
    std::string model;
    world_.broadcast(model, "setup: the tokenizer");
    return RunTokenizer{data::Tokenizer::from_serialized(model), {}};
}

// The run starts: its directory and first files appear only now.
void Trainer::create_run_directory() {
    if (!leader_) return;
    run_.create();
    if (!resumed_) {
        run_.write_file("config.json", config_.resolved.dump(2) + "\n");
        for (const auto& [name, contents] : tokenizer_->files) run_.write_file(name, contents);
    }
    metrics_ = MetricsLog(run_.root() / "metrics.jsonl", resumed_.has_value());
}

// Before the run directory exists, so that a checkpoint that does not fit leaves nothing behind.
void Trainer::initialize_from_pretrained() {
    models::check_init_architecture(tasks::saved_config(*pretrained_).model, run_config_.model, config_.init_from);
    const models::InitReport report = task_->initialize_from(*pretrained_);
    for (const auto& [from, to] : report.mapped) spdlog::info("init_from: {} <- {}", to, from);
    for (const auto& name : report.fresh) spdlog::info("init_from: {} fresh", name);
    for (const auto& name : report.unused) spdlog::info("init_from: {} unused", name);
    pretrained_.reset();
}

// Rank 0 alone writes the records the observers add to.
void Trainer::start_observers() {
    if (!leader_) return;
    for (TrainingObserver* observer : options_.observers) observer->start({run_config_, tokenizer_->tokenizer, *task_});
}

// ---- the checkpoint: everything a resumed run needs, written and read back in the same order -------

io::CheckpointWriter Trainer::save_checkpoint() const {
    // 1. The run's metadata and training state (step, schedule, dropout stream, data position, best metric).
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
    // 2. The parameters.
    models::add_parameters(writer, task_->model());
    // 3. The optimizer's moments.
    optimizer_->save(writer);
    // 4. The tokenizer.
    writer.add_bytes("tokenizer.model", tokenizer_->tokenizer.serialized_model());
    return writer;
}

void Trainer::restore_checkpoint(const io::Checkpoint& checkpoint) {
    // 1. The training state (the config's differences were logged by share_resumed_checkpoint).
    state_ = load_state(checkpoint.metadata());
    if (options_.reset_schedule) {
        state_.schedule_offset = state_.step;
        spdlog::warn("resume: learning-rate schedule restarts at step {} (--reset-schedule)", state_.step);
    }
    dropout_rng_.set_state(state_.dropout_rng);
    task_->restore(state_.data_position);
    // 2. The parameters.
    models::load_parameters(checkpoint, task_->model());
    // 3. The optimizer's moments.
    if (options_.reset_optimizer) {
        spdlog::warn("resume: optimizer moments reset (--reset-optimizer)");
        state_.optimizer_steps = 0;
    } else {
        optimizer_->load(checkpoint, state_.optimizer_steps);
    }
    // 4. The tokenizer was read before the model was built, whose size it sets (choose_tokenizer).
}

TrainResult Trainer::run() {
    SignalGuard signals;
    const TrainSchedule schedule(config_, state_.step, options_.stop_after_steps);
    progress_.start(state_.step);
    std::optional<StopReason> stop;
    while (!stop && !schedule.finished(state_.step)) {
        double grad_norm = 0.0, learning_rate = 0.0;
        double loss = 0.0;
        try {
            loss = train_step(grad_norm, learning_rate);
        } catch (const AllocationError& e) {
            throw out_of_memory(state_.step + 1, e.what(), definition_, run_.checkpoint_dir().string());
        } catch (const std::bad_alloc&) {
            throw out_of_memory(state_.step + 1, "an allocation outside the tensors failed", definition_, run_.checkpoint_dir().string());
        }
        progress_.add_step(loss);
        if (leader_ && schedule.log_due(state_.step)) log_progress(grad_norm, learning_rate);
        const bool patience_left = !(leader_ && schedule.validation_due(state_.step)) || validate();
        if (schedule.checkpoint_due(state_.step)) save_step_checkpoint();
        // All ranks stop at the same step: rank 0 alone decides early stopping, and a signal may reach
        // the ranks during different steps.
        std::array<double, 2> votes{patience_left ? 0.0 : 1.0, pending_signal() != 0 ? 1.0 : 0.0};
        if (distributed_) world_.sum(votes, fmt::format("step {}: stop?", state_.step));
        stop = schedule.stop(state_.step, votes[0] > 0.0, votes[1] > 0.0);
    }
    const StopReason reason = stop.value_or(StopReason::completed);
    log_stop(reason, config_.validation.patience, options_.stop_after_steps);
    if (leader_ && schedule.final_validation_due(state_.step, reason)) validate();
    if (schedule.final_checkpoint_due(state_.step)) save_step_checkpoint();
    return {state_.step, progress_.last_loss(), state_.best_metric, reason, reason == StopReason::signal ? pending_signal() : 0};
}

// A batch's counts, summed over the ranks when each rank's batcher counted only its own rows.
tasks::BatchTokens Trainer::batch_counts(tasks::BatchTokens tokens, int64_t step) {
    if (!tokens.sum_over_ranks) return tokens;
    std::array<double, 2> counts{static_cast<double>(tokens.global), static_cast<double>(tokens.input)};
    world_.sum(std::span<double>(counts), fmt::format("step {}: batch counts", step));
    tokens.global = static_cast<int64_t>(counts[0]);
    tokens.input = static_cast<int64_t>(counts[1]);
    tokens.sum_over_ranks = false;
    return tokens;
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
        const tasks::BatchTokens tokens = batch_counts(task_->next_batch(world_.rank(), world_.size()), step);
        progress_.add_batch(tokens);
        // The last backward pass of the step starts the gradient sums as its gradients become final.
        const bool sums_overlap = distributed_ && micro + 1 == micro_batches;
        if (sums_overlap) reducer_->begin(world_, fmt::format("step {}: gradients", step));
        if (tokens.shard == 0) continue;  // fewer rows than ranks: this rank adds nothing to the sums
        Var loss = task_->batch_loss(tokens);
        const float value = loss.item();
        HNAS_CHECK(std::isfinite(value), "step ", step, ": the loss is ", value, "; stopping without a checkpoint ",
                   "(the last good one is in ", run_.checkpoint_dir().string(), ")");
        step_loss += value / static_cast<double>(micro_batches);
        const auto backward_start = Clock::now();
        loss.backward(Tensor::full({}, micro_weight), sums_overlap ? reducer_->hooks() : BackwardHooks{});
        progress_.add_backward(std::chrono::duration<double>(Clock::now() - backward_start).count());
    }
    if (distributed_) {
        // The wait runs until every rank has the sums: the loss sum after them returns only then.
        const auto wait_start = Clock::now();
        reducer_->finish();
        world_.sum(std::span<double>(&step_loss, 1), fmt::format("step {}: loss", step));
        progress_.add_gradient_wait(std::chrono::duration<double>(Clock::now() - wait_start).count());
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
    const ProgressWindow::Summary window = progress_.close(step, config_.train.steps);
    const data::DataPosition position = task_->position();
    const Json memory = memory_record();
    // Data-parallel runs: the part of the gradient sums the backward pass did not hide.
    const std::string gradient_wait =
        distributed_ ? fmt::format("  gradient wait {:.0f} ms/step", portable(1e3 * window.gradient_wait_seconds_per_step)) : "";
    spdlog::info("step {:>7}/{}  epoch {}  loss {:.4f}  lr {:.3e}  |g| {:.3f}  {:.0f} input tok/s  {:.0f} {}/s  rss {}  elapsed {}  eta {}{}",
                 step, config_.train.steps, position.epoch, portable(window.loss), portable(learning_rate), portable(grad_norm),
                 portable(window.input_tokens_per_second), portable(window.targets_per_second), definition_.target_unit,
                 gibibytes(memory["rss"].get<int64_t>()), format_duration(window.elapsed_seconds), format_duration(window.eta_seconds),
                 gradient_wait);
    Json record = {{"step", step},
                   {"epoch", position.epoch},
                   {"loss", window.loss},
                   {"learning_rate", learning_rate},
                   {"grad_norm", grad_norm},
                   {"input_tokens_per_second", window.input_tokens_per_second},
                   {"targets_per_second", window.targets_per_second},
                   {"target_unit", definition_.target_unit},
                   {"elapsed_seconds", window.elapsed_seconds},
                   {"memory", memory},
                   {"profile", profile_record()}};
    for (TrainingObserver* observer : options_.observers) observer->at_progress(task_->model(), step, record);
    if (distributed_) {
        record["distributed"] = {{"backward_seconds_per_step", window.backward_seconds_per_step},
                                 {"gradient_wait_seconds_per_step", window.gradient_wait_seconds_per_step},
                                 {"buckets", reducer_->buckets()},
                                 {"gradient_floats", reducer_->floats()},
                                 {"gradient_floats_last_bucket", reducer_->last_bucket_floats()}};
    }
    metrics_.write(record);
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
    for (TrainingObserver* observer : options_.observers) observer->at_validation(task_->model(), step, record);
    metrics_.write(record);
    spdlog::info("validation at step {}: loss {:.4f}  perplexity {:.2f}{}{}", step, portable(result->loss),
                 portable(std::exp(result->loss)), metrics_text, improved ? "  (best)" : "");
    if (improved) run_.write_best_checkpoint(save_checkpoint());
    return config_.validation.patience == 0 || state_.stale_validations < config_.validation.patience;
}

// Every rank holds the same parameters (the same start, the same summed gradients, the same step):
// checked before each checkpoint, which rank 0 writes for all.
void Trainer::save_step_checkpoint() {
    check_replicas();
    if (!leader_) return;
    const fs::path path = run_.write_step_checkpoint(state_.step, save_checkpoint(), config_.checkpoint.keep);
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
