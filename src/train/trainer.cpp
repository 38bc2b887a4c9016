#include "train/trainer.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <bit>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <chrono>
#include <cmath>
#include <csignal>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <span>
#include <thread>

#include "backend/matmul.h"
#include "data/batch.h"
#include "data/gigaword.h"
#include "decode/headlines.h"
#include "dist/gradient_reducer.h"
#include "eval/rouge.h"
#include "models/bert.h"
#include "models/model_factory.h"
#include "models/memory_estimate.h"
#include "models/model_io.h"
#include "optim/optimizer.h"
#include "optim/schedule.h"
#include "tensor/number_format.h"
#include "tensor/system_memory.h"
#include "train/run_directory.h"

namespace hnas::train {

namespace fs = std::filesystem;
using config::Json;
using config::Task;

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

// ---- the two tasks behind one interface --------------------------------------------------------------
struct Validation {
    double loss = 0.0;
    std::optional<double> rouge_l;
    int64_t tokens = 0;
};

// Loss-bearing tokens of a global batch and of this rank's shard of it.
struct BatchTokens {
    int64_t global = 0, shard = 0;
};

// Keeps rank `rank`'s rows of a global batch (all of it for one rank).
template <typename Batch, typename TokensOf>
BatchTokens take_shard(Batch& batch, int rank, int ranks, TokensOf tokens_of) {
    BatchTokens tokens{tokens_of(batch), tokens_of(batch)};
    if (ranks == 1) return tokens;
    const auto [first, last] = data::shard_rows(tokens_of.rows(batch), rank, ranks);
    if (first == last) {
        tokens.shard = 0;
    } else {
        batch = data::slice_rows(batch, first, last);
        tokens.shard = tokens_of(batch);
    }
    return tokens;
}

class TrainingTask {
public:
    virtual ~TrainingTask() = default;
    virtual models::Model& model() = 0;
    // Loads the next global training batch and keeps rank `rank`'s shard of it for batch_loss().
    virtual BatchTokens next_batch(int rank, int ranks) = 0;
    virtual Var batch_loss() = 0;
    virtual data::DataPosition position() const = 0;
    virtual void restore(const data::DataPosition& position) = 0;
    virtual std::optional<Validation> validate() = 0;
};

// The loss over a validation batcher from its start (at most max_batches), weighted by each batch's
// loss-bearing tokens.
template <typename Batcher, typename LossOf, typename Tokens>
Validation validation_loss(Batcher& batcher, const data::DataPosition& start, int64_t max_batches, LossOf loss_of,
                           Tokens tokens_of) {
    Validation result;
    double weighted = 0.0;
    batcher.restore(start);
    int64_t batches = 0;
    while (auto batch = batcher.next()) {
        const int64_t tokens = tokens_of(*batch);
        weighted += static_cast<double>(loss_of(*batch).item()) * static_cast<double>(tokens);
        result.tokens += tokens;
        if (max_batches > 0 && ++batches >= max_batches) break;
    }
    result.loss = result.tokens > 0 ? weighted / static_cast<double>(result.tokens) : 0.0;
    return result;
}

class HeadlineTask : public TrainingTask {
public:
    HeadlineTask(const config::ExperimentConfig& config, const data::Tokenizer& tokenizer, Rng& init, Rng& dropout)
        : config_(config), tokenizer_(tokenizer) {
        model_ = std::make_unique<models::Seq2SeqModel>(config.model, init, dropout);
        train_ = std::make_unique<data::Seq2SeqBatcher>(tokenizer, data_options(config.data.train_articles,
                                                                                config.data.train_titles, true));
        valid_ = std::make_unique<data::Seq2SeqBatcher>(tokenizer, data_options(config.data.valid_articles,
                                                                                config.data.valid_titles, false));
        valid_start_ = valid_->position();
        const auto articles = eval::read_lines(config.data.valid_articles);
        const auto titles = eval::read_lines(config.data.valid_titles);
        const size_t count = std::min<size_t>(articles.size(), static_cast<size_t>(config.validation.decode_examples));
        decode_articles_.assign(articles.begin(), articles.begin() + static_cast<std::ptrdiff_t>(count));
        decode_references_.assign(titles.begin(), titles.begin() + static_cast<std::ptrdiff_t>(count));
    }

    models::Model& model() override { return *model_; }
    models::Seq2SeqModel& seq2seq() { return *model_; }

    BatchTokens next_batch(int rank, int ranks) override {
        batch_ = *train_->next();  // the training stream never ends (epochs = 0)
        struct {
            int64_t operator()(const data::Seq2SeqBatch& b) const { return b.target_tokens; }
            int64_t rows(const data::Seq2SeqBatch& b) const { return b.source_ids.dim(0); }
        } tokens_of;
        return take_shard(batch_, rank, ranks, tokens_of);
    }
    Var batch_loss() override { return loss_of(batch_); }
    data::DataPosition position() const override { return train_->position(); }
    void restore(const data::DataPosition& position) override { train_->restore(position); }

    std::optional<Validation> validate() override {
        NoGradScope no_grad;
        model_->set_training(false);
        Validation result = validation_loss(
            *valid_, valid_start_, config_.validation.max_batches, [&](const data::Seq2SeqBatch& b) { return loss_of(b); },
            [](const data::Seq2SeqBatch& b) { return b.target_tokens; });
        if (!decode_articles_.empty()) result.rouge_l = decode_rouge_l();
        model_->set_training(true);
        return result;
    }


private:
    data::Seq2SeqDataOptions data_options(const std::string& articles, const std::string& titles, bool training) const {
        data::Seq2SeqDataOptions o;
        o.article_path = articles;
        o.title_path = titles;
        o.max_source = std::min(config_.data.max_source, config_.model.max_source_positions);
        o.max_target = std::min(config_.data.max_target, config_.model.max_target_positions);
        o.shuffle_buffer = config_.data.shuffle_buffer;
        o.damaged_lines = config_.data.damaged_lines;
        o.shuffle = training;
        o.seed = config_.seed;
        o.batch = {config_.data.batch_sentences, config_.data.batch_tokens};
        o.epochs = training ? 0 : 1;
        return o;
    }

    Var loss_of(const data::Seq2SeqBatch& b) const {
        return model_->loss(b.source_ids, b.source_valid, b.target_input, b.target_output, b.target_valid,
                            config_.train.label_smoothing);
    }

    // Greedy headlines (beam 1) for the first validation articles, scored with ROUGE-L F1 (no stemming).
    double decode_rouge_l() const {
        decode::BeamOptions greedy;
        greedy.beam = 1;
        greedy.max_length = config_.validation.max_decode_length;
        const auto headlines = decode::decode_articles(*model_, tokenizer_, decode_articles_, greedy, 32,
                                                       std::min(config_.data.max_source, config_.model.max_source_positions));
        std::vector<std::string> hypotheses;
        for (const auto& best : headlines) hypotheses.push_back(best.empty() ? std::string() : best.front().text);
        const eval::RougeScorer scorer(false);
        return scorer.score(hypotheses, decode_references_).rouge_l.f1;
    }

    const config::ExperimentConfig& config_;
    data::Tokenizer tokenizer_;
    std::unique_ptr<models::Seq2SeqModel> model_;
    std::unique_ptr<data::Seq2SeqBatcher> train_, valid_;
    data::DataPosition valid_start_;
    data::Seq2SeqBatch batch_;
    std::vector<std::string> decode_articles_, decode_references_;
};

class MlmTask : public TrainingTask {
public:
    MlmTask(const config::ExperimentConfig& config, const data::Tokenizer& tokenizer, Rng& init, Rng& dropout)
        : config_(config) {
        model_ = std::make_unique<models::BertModel>(config.model, init, dropout);
        train_ = std::make_unique<data::MlmBatcher>(tokenizer, data_options(config.data.train_sources, true));
        if (!config.data.valid_sources.empty()) {
            valid_ = std::make_unique<data::MlmBatcher>(tokenizer, data_options(config.data.valid_sources, false));
            valid_start_ = valid_->position();
        }
    }

    models::Model& model() override { return *model_; }
    BatchTokens next_batch(int rank, int ranks) override {
        batch_ = *train_->next();
        struct {
            int64_t operator()(const data::MlmBatch& b) const { return b.masked_labels.numel(); }
            int64_t rows(const data::MlmBatch& b) const { return b.input_ids.dim(0); }
        } tokens_of;
        return take_shard(batch_, rank, ranks, tokens_of);
    }
    Var batch_loss() override { return loss_of(batch_); }
    data::DataPosition position() const override { return train_->position(); }
    void restore(const data::DataPosition& position) override { train_->restore(position); }

    std::optional<Validation> validate() override {
        if (!valid_) return std::nullopt;
        NoGradScope no_grad;
        model_->set_training(false);
        const Validation result = validation_loss(
            *valid_, valid_start_, config_.validation.max_batches, [&](const data::MlmBatch& b) { return loss_of(b); },
            [](const data::MlmBatch& b) { return b.masked_labels.numel(); });
        model_->set_training(true);
        return result;
    }


private:
    data::MlmDataOptions data_options(const std::vector<data::TextSource>& sources, bool training) const {
        data::MlmDataOptions o;
        o.sources = sources;
        o.max_seq = std::min(config_.data.max_seq, config_.model.max_source_positions);
        o.masking = config_.data.masking;
        o.damaged_lines = config_.data.damaged_lines;
        o.shuffle = training;
        o.seed = training ? config_.seed : config_.seed + 1;
        o.batch = {config_.data.batch_sentences, config_.data.batch_tokens};
        o.epochs = training ? 0 : 1;
        return o;
    }

    // The masked-LM loss, plus ALBERT's sentence-order loss on the pooled [CLS] when it has a weight.
    Var loss_of(const data::MlmBatch& b) const {
        const Var states = model_->encode(b.input_ids, b.segment_ids, b.valid);
        Var loss = ops::cross_entropy(model_->mlm_logits(states, b.masked_positions), b.masked_labels, models::kPadId);
        if (config_.train.sentence_order_weight == 0.0f) return loss;
        const Var order = ops::cross_entropy(model_->sentence_order_logits(model_->pooled(states)), b.sentence_order);
        return ops::add(loss, ops::scale(order, config_.train.sentence_order_weight));
    }

    const config::ExperimentConfig& config_;
    std::unique_ptr<models::BertModel> model_;
    std::unique_ptr<data::MlmBatcher> train_, valid_;
    data::DataPosition valid_start_;
    data::MlmBatch batch_;
};

// ---- helpers ---------------------------------------------------------------------------------------

// ---- before a run writes anything: data, memory, tokenizer ------------------------------------------

// A text file the config reads, with the key that names it.
struct DataFile {
    std::string key, path;
    bool training;  // a training file must hold text
};

std::vector<DataFile> data_files(const config::ExperimentConfig& config) {
    std::vector<DataFile> files;
    if (config.task == Task::headline) {
        files = {{"data.train_articles", config.data.train_articles, true},
                 {"data.train_titles", config.data.train_titles, true},
                 {"data.valid_articles", config.data.valid_articles, false},
                 {"data.valid_titles", config.data.valid_titles, false}};
    } else {
        for (size_t i = 0; i < config.data.train_sources.size(); ++i) {
            files.push_back({fmt::format("data.train_sources[{}].path", i), config.data.train_sources[i].path, true});
        }
        for (size_t i = 0; i < config.data.valid_sources.size(); ++i) {
            files.push_back({fmt::format("data.valid_sources[{}].path", i), config.data.valid_sources[i].path, false});
        }
    }
    if (config.tokenizer.model.empty()) {
        for (size_t i = 0; i < config.tokenizer.inputs.size(); ++i) {
            files.push_back({fmt::format("tokenizer.inputs[{}]", i), config.tokenizer.inputs[i], true});
        }
    }
    return files;
}

// One pass over every data file: damaged lines (an error, or counted under data.damaged_lines "skip")
// and training files without text are found before the run writes anything.
void check_data_files(const config::ExperimentConfig& config) {
    for (const DataFile& file : data_files(config)) {
        data::TextFileScan scan;
        try {
            scan = data::scan_text_file(file.path, config.data.damaged_lines);
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

// The largest batch the data settings allow, for the memory estimate.
models::BatchShape largest_batch(const config::ExperimentConfig& config) {
    models::BatchShape batch;
    const auto rows_of = [&](int64_t length) {
        const int64_t by_tokens = config.data.batch_tokens > 0 ? config.data.batch_tokens / length : 0;
        if (config.data.batch_sentences == 0) return by_tokens;
        return by_tokens > 0 ? std::min(config.data.batch_sentences, by_tokens) : config.data.batch_sentences;
    };
    if (config.task == Task::headline) {
        batch.source_length = std::min(config.data.max_source, config.model.max_source_positions);
        batch.target_length = std::min(config.data.max_target, config.model.max_target_positions);
        batch.rows = std::max<int64_t>(1, rows_of(std::max(batch.source_length, batch.target_length)));
        batch.predicted_tokens = batch.rows * batch.target_length;
    } else {
        batch.source_length = std::min(config.data.max_seq, config.model.max_source_positions);
        batch.rows = std::max<int64_t>(1, rows_of(batch.source_length));
        batch.predicted_tokens =
            batch.rows * static_cast<int64_t>(std::ceil(config.data.masking.mask_prob * static_cast<double>(batch.source_length)));
    }
    return batch;
}

std::string gibibytes(int64_t bytes) { return fmt::format("{:.2f} GiB", static_cast<double>(bytes) / (1 << 30)); }

// Refuses a model and batch that cannot fit beside the other ranks on this host, before building it.
void check_memory(const config::ExperimentConfig& config, int64_t vocab_size, int local_ranks) {
    models::ModelConfig model = config.model;
    model.vocab_size = vocab_size;
    const models::BatchShape batch = largest_batch(config);
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
        "activations of a batch of {} rows x {} tokens: {}){}, but {} is available ({}); the size is driven by "
        "model.d_model, model.ffn_dim, model.heads, model.encoder_layers{}, the vocabulary (tokenizer.vocab_size or "
        "model.vocab_size), data.batch_sentences, data.batch_tokens and {}",
        gibibytes(needed), estimate.parameters, gibibytes(estimate.parameter_bytes), batch.rows, batch.source_length,
        gibibytes(estimate.activation_bytes),
        local_ranks > 1 ? fmt::format(" for each of {} ranks on this host", local_ranks) : std::string(),
        gibibytes(available.bytes), available.source, config.task == Task::headline ? ", model.decoder_layers" : "",
        config.task == Task::headline ? "data.max_source, data.max_target" : "data.max_seq"));
}

// The vocabulary size the run will have, known without training a tokenizer.
int64_t expected_vocab_size(const config::ExperimentConfig& config, const std::optional<io::Checkpoint>& resumed) {
    if (config.model.vocab_size > 0) return config.model.vocab_size;
    if (resumed) return resumed->metadata().at("vocab_size").get<int64_t>();
    if (!config.tokenizer.model.empty()) return data::Tokenizer::load(config.tokenizer.model).vocab_size();
    return config.tokenizer.vocab_size;
}

// A tokenizer trained from the data for a new run: trained in a temporary folder, so that nothing
// reaches the run directory before the run starts (RunTokenizer::files are written then).
struct RunTokenizer {
    data::Tokenizer tokenizer;
    std::vector<std::pair<std::string, std::string>> files;  // name in the run directory, contents
};

RunTokenizer train_run_tokenizer(const config::ExperimentConfig& config) {
    data::TokenizerTrainOptions options;
    options.inputs = config.tokenizer.inputs;
    if (options.inputs.empty()) {
        if (config.task == Task::headline) {
            options.inputs = {config.data.train_articles, config.data.train_titles};
        } else {
            for (const auto& source : config.data.train_sources) options.inputs.push_back(source.path);
        }
    }
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
    spdlog::info("training a {} tokenizer of {} pieces on {} file(s)", options.type, options.vocab_size, options.inputs.size());
    data::train_tokenizer(options);
    RunTokenizer result{data::Tokenizer::load(options.model_prefix + ".model"), {}};
    std::ifstream vocab(options.model_prefix + ".vocab", std::ios::binary);
    std::ostringstream vocab_text;
    vocab_text << vocab.rdbuf();
    result.files = {{"tokenizer.model", result.tokenizer.serialized_model()}, {"tokenizer.vocab", vocab_text.str()}};
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

Json rng_state_json(const Rng& rng) {
    Json state = Json::array();
    for (uint64_t word : rng.state()) state.push_back(word);
    return state;
}

Rng::State rng_state_from(const Json& json) {
    Rng::State state{};
    HNAS_CHECK(json.is_array() && json.size() == state.size(), "checkpoint: malformed RNG state");
    for (size_t i = 0; i < state.size(); ++i) state[i] = json[i].get<uint64_t>();
    return state;
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
        for (int64_t i = 0; i < value.numel(); ++i) hash = data::hash_combine(hash, std::bit_cast<uint32_t>(value.data()[i]));
    }
    return std::to_string(hash);
}

std::string format_duration(double seconds) {
    const auto total = static_cast<int64_t>(seconds);
    char text[32];
    std::snprintf(text, sizeof text, "%lld:%02lld:%02lld", static_cast<long long>(total / 3600),
                  static_cast<long long>(total / 60 % 60), static_cast<long long>(total % 60));
    return text;
}

}  // namespace

TrainResult train(const config::ExperimentConfig& config, const TrainOptions& options) {
    using Clock = std::chrono::steady_clock;
    RunDirectory run(options.run_dir);
    const fs::path checkpoint_dir = run.checkpoint_dir();
    const std::unique_ptr<dist::Communicator> own_communicator = options.communicator ? nullptr : dist::single_process();
    dist::Communicator& world = options.communicator ? *options.communicator : *own_communicator;
    const bool distributed = world.size() > 1, leader = world.rank() == 0;
    if (distributed) {
        // An explicit OMP_NUM_THREADS counts as a request, like train.threads.
        const int requested = config.train.threads > 0                 ? config.train.threads
                              : std::getenv("OMP_NUM_THREADS") != nullptr ? backend::num_threads()
                                                                          : 0;
        backend::set_num_threads(dist::threads_per_rank(requested, world.local_size()));
        spdlog::info("data-parallel over {} ranks ({} on this host of {} cores): {} OpenMP thread(s) per rank{}",
                     world.size(), world.local_size(), std::thread::hardware_concurrency(), backend::num_threads(),
                     requested > backend::num_threads() ? fmt::format(" (not the {} requested: the cores would be oversubscribed)", requested)
                                                        : std::string());
    } else if (config.train.threads > 0) {
        backend::set_num_threads(config.train.threads);
    }
    backend::set_matmul_precision(config.train.precision);
    spdlog::info("hnas {} on {}; {} matmuls; run directory {}", HNAS_VERSION, backend::describe(),
                 backend::precision_name(config.train.precision), run.root().string());

    // Rank 0 owns the run directory; the other ranks read from it only when resuming. Everything is
    // checked before the first file is written, so a failed start leaves nothing behind.
    std::optional<io::Checkpoint> resumed;
    std::string resume_path;
    if (leader) {
        if (options.resume) {
            HNAS_CHECK(fs::is_directory(checkpoint_dir), "train --resume: ", checkpoint_dir.string(), " does not exist");
            resumed = run.load_newest_checkpoint();
            resume_path = resumed->path();
        } else {
            HNAS_CHECK(run.step_checkpoints().empty(), "train: ", checkpoint_dir.string(),
                       " already holds checkpoints; pass --resume to continue that run or choose another --out");
        }
        check_data_files(config);
        check_memory(config, expected_vocab_size(config, resumed), world.local_size());
    }
    if (options.resume) {
        world.broadcast(resume_path, "setup: the checkpoint to resume from");
        if (!leader) resumed = io::Checkpoint::load(resume_path);
        spdlog::info("resuming from {} (written by {} rank(s))", resumed->path(), resumed->metadata().value("ranks", 1));
        if (leader) log_config_differences(resumed->metadata().at("config"), config.resolved);
    }

    RunTokenizer run_tokenizer = [&] {
        if (resumed) return RunTokenizer{data::Tokenizer::from_serialized(resumed->bytes("tokenizer.model")), {}};
        if (!config.tokenizer.model.empty()) return RunTokenizer{data::Tokenizer::load(config.tokenizer.model), {}};
        if (!distributed) return train_run_tokenizer(config);
        // Only rank 0 trains the tokenizer; the others receive its model.
        if (leader) {
            RunTokenizer trained = train_run_tokenizer(config);
            std::string model = trained.tokenizer.serialized_model();
            world.broadcast(model, "setup: the tokenizer");
            return trained;
        }
        std::string model;
        world.broadcast(model, "setup: the tokenizer");
        return RunTokenizer{data::Tokenizer::from_serialized(model), {}};
    }();
    const data::Tokenizer& tokenizer = run_tokenizer.tokenizer;
    config::ExperimentConfig run_config = config;
    if (run_config.model.vocab_size == 0) run_config.model.vocab_size = tokenizer.vocab_size();
    HNAS_CHECK(run_config.model.vocab_size == tokenizer.vocab_size(), "train: model.vocab_size is ",
               run_config.model.vocab_size, " but the tokenizer has ", tokenizer.vocab_size(), " pieces");

    Rng init_rng(config.seed, kInitStream), dropout_rng(config.seed, kDropoutStream);
    std::unique_ptr<TrainingTask> task;
    if (config.task == Task::headline) {
        task = std::make_unique<HeadlineTask>(run_config, tokenizer, init_rng, dropout_rng);
    } else {
        task = std::make_unique<MlmTask>(run_config, tokenizer, init_rng, dropout_rng);
    }
    // The run starts: its directory and first files appear only now.
    if (leader) {
        run.create();
        if (!resumed) {
            run.write_file("config.json", config.resolved.dump(2) + "\n");
            for (const auto& [name, contents] : run_tokenizer.files) run.write_file(name, contents);
        }
    }
    models::Model& model = task->model();
    const auto parameters = model.named_parameters();
    spdlog::info("model: {} parameters; vocabulary {}", model.parameter_count(), run_config.model.vocab_size);
    optim::Optimizer optimizer(parameters, config.train.optimizer);

    const bool higher_is_better = config.validation.metric == "rouge_l";
    int64_t step = 0, schedule_offset = 0, stale_validations = 0;
    std::optional<double> best_metric;
    if (resumed) {
        const Json& meta = resumed->metadata();
        models::load_parameters(*resumed, model);
        step = meta.at("step").get<int64_t>();
        if (options.reset_optimizer) {
            spdlog::warn("resume: optimizer moments reset (--reset-optimizer)");
        } else {
            optimizer.load(*resumed, meta.at("optimizer_steps").get<int64_t>());
        }
        schedule_offset = options.reset_schedule ? step : meta.at("schedule_offset").get<int64_t>();
        if (options.reset_schedule) spdlog::warn("resume: learning-rate schedule restarts at step {} (--reset-schedule)", step);
        dropout_rng.set_state(rng_state_from(meta.at("dropout_rng")));
        data::DataPosition position;
        data::from_json(meta.at("data_position"), position);
        task->restore(position);
        if (!meta.at("best_metric").is_null()) best_metric = meta.at("best_metric").get<double>();
        stale_validations = meta.at("stale_validations").get<int64_t>();
    } else if (!config.init_from.empty()) {
        const models::InitReport report = models::initialize_from_bert(
            io::Checkpoint::load(config.init_from), static_cast<HeadlineTask&>(*task).seq2seq());
        for (const auto& [from, to] : report.mapped) spdlog::info("init_from: {} <- {}", to, from);
        for (const auto& name : report.fresh) spdlog::info("init_from: {} fresh", name);
        for (const auto& name : report.unused) spdlog::info("init_from: {} unused", name);
    }

    // Everything a resumed run needs.
    auto checkpoint_writer = [&] {
        Json meta = {{"hnas_version", HNAS_VERSION},
                     {"ranks", world.size()},
                     {"config", config.resolved},
                     {"vocab_size", run_config.model.vocab_size},
                     {"step", step},
                     {"optimizer_steps", optimizer.steps_taken()},
                     {"schedule_offset", schedule_offset},
                     {"dropout_rng", rng_state_json(dropout_rng)},
                     {"best_metric", best_metric ? Json(*best_metric) : Json()},
                     {"stale_validations", stale_validations}};
        nlohmann::json position;
        data::to_json(position, task->position());
        meta["data_position"] = Json::parse(position.dump());
        io::CheckpointWriter writer(meta);
        models::add_parameters(writer, model);
        optimizer.save(writer);
        writer.add_bytes("tokenizer.model", tokenizer.serialized_model());
        return writer;
    };
    auto save_step_checkpoint = [&] {
        const fs::path path = run.write_step_checkpoint(step, checkpoint_writer(), config.checkpoint.keep);
        spdlog::info("checkpoint {}", path.string());
    };

    // Every rank holds the same parameters (the same start, the same summed gradients, the same
    // step): checked before each checkpoint, which rank 0 writes for all.
    auto check_replicas = [&] {
        if (!distributed) return;
        const std::string mine = parameter_fingerprint(parameters);
        std::string leaders = mine;
        world.broadcast(leaders, fmt::format("step {}: parameter check", step));
        HNAS_CHECK(mine == leaders, "step ", step, ": rank ", world.rank(), "'s parameters differ from rank 0's");
    };
    check_replicas();

    std::ofstream metrics;
    // A resumed run appends to the log; a new one replaces a log left by a start that wrote no checkpoint.
    if (leader) metrics.open(run.root() / "metrics.jsonl", resumed ? std::ios::app : std::ios::trunc);
    auto hybrid_weights = [&] {
        Json weights = Json::object();
        for (const auto& [name, attention] : model.attentions()) {
            for (const auto& values : attention->head_values()) {
                if (values.name == "u") weights[name] = values.values;
            }
        }
        return weights;
    };

    // Validation: logs, records the metric, keeps best.ckpt; returns false when patience ran out.
    auto validate = [&] {
        const auto result = task->validate();
        if (!result) {
            spdlog::info("step {}: no validation data", step);
            return true;
        }
        Json record = {{"step", step}, {"validation_loss", result->loss}, {"validation_perplexity", std::exp(result->loss)}};
        std::string rouge_text;
        if (result->rouge_l) {
            record["validation_rouge_l"] = *result->rouge_l;
            rouge_text = fmt::format("  ROUGE-L {:.2f}", portable(100.0 * *result->rouge_l));
        }
        const double metric = higher_is_better ? result->rouge_l.value_or(0.0) : result->loss;
        const bool improved = !best_metric || (higher_is_better ? metric > *best_metric : metric < *best_metric);
        if (improved) {
            best_metric = metric;
            stale_validations = 0;
        } else {
            ++stale_validations;
        }
        record["best_metric"] = *best_metric;
        metrics << record.dump() << "\n" << std::flush;
        spdlog::info("validation at step {}: loss {:.4f}  perplexity {:.2f}{}{}", step, portable(result->loss),
                     portable(std::exp(result->loss)), rouge_text, improved ? "  (best)" : "");
        if (improved) run.write_best_checkpoint(checkpoint_writer());
        return config.validation.patience == 0 || stale_validations < config.validation.patience;
    };

    SignalGuard signals;
    TrainResult result;
    result.stopped_because = "completed";
    const auto start = Clock::now();
    auto window_start = start;
    double window_loss = 0.0;
    int64_t window_steps = 0, window_tokens = 0;
    const int64_t first_step = step;
    optim::ScheduleOptions schedule = config.train.schedule;
    schedule.total_steps = config.train.steps - schedule_offset;

    std::optional<dist::GradientReducer> reducer;
    if (distributed) reducer.emplace(parameters);

    while (step < config.train.steps) {
        ++step;
        // Each rank's dropout masks must differ from the others'. The stream is derived from (step,
        // rank) rather than carried, so a checkpoint needs no per-rank state and resumes on any
        // number of ranks. (Masks drawn for a slice of the batch cannot equal the single process's
        // masks of those rows; docs/distributed.md.)
        if (distributed) dropout_rng = Rng(config.seed, data::hash_combine(data::hash_combine(kDropoutStream, step), world.rank()));
        optimizer.zero_grad();
        double step_loss = 0.0;
        const float micro_weight = 1.0f / static_cast<float>(config.train.gradient_accumulation);
        for (int64_t micro = 0; micro < config.train.gradient_accumulation; ++micro) {
            const BatchTokens tokens = task->next_batch(world.rank(), world.size());
            window_tokens += tokens.global;
            if (tokens.shard == 0) continue;  // fewer rows than ranks: this rank adds nothing to the sums
            Var loss = task->batch_loss();
            const float value = loss.item();
            HNAS_CHECK(std::isfinite(value), "step ", step, ": the loss is ", value, "; stopping without a checkpoint ",
                       "(the last good one is in ", checkpoint_dir.string(), ")");
            // The loss is the mean over the shard's tokens; weighted by the shard's share of the global
            // batch's tokens, its sum over the ranks is the mean over the global batch — the single
            // process's loss (and gradient), not a mean of per-rank means.
            const double share = static_cast<double>(tokens.shard) / static_cast<double>(tokens.global);
            step_loss += value * share / static_cast<double>(config.train.gradient_accumulation);
            loss.backward(Tensor::full({}, micro_weight * static_cast<float>(share)));
        }
        if (distributed) {
            reducer->sum(world, fmt::format("step {}: gradients", step));
            world.sum(std::span<double>(&step_loss, 1), fmt::format("step {}: loss", step));
        }
        const double grad_norm = optim::clip_gradients(parameters, config.train.clip_norm);
        if (!std::isfinite(grad_norm)) {
            throw Error("step " + std::to_string(step) + ": non-finite gradient in " + first_non_finite_gradient(parameters) +
                        "; stopping without a checkpoint (the last good one is in " + checkpoint_dir.string() + ")");
        }
        const double learning_rate = optim::learning_rate_at(schedule, step - schedule_offset);
        optimizer.step(static_cast<float>(learning_rate));
        result.last_loss = step_loss;
        window_loss += step_loss;
        ++window_steps;

        if (leader && (step % config.train.log_every == 0 || step == config.train.steps)) {
            const auto now = Clock::now();
            const double elapsed = std::chrono::duration<double>(now - start).count();
            const double window = std::chrono::duration<double>(now - window_start).count();
            const double tokens_per_second = static_cast<double>(window_tokens) / std::max(window, 1e-9);
            const double eta = elapsed / static_cast<double>(step - first_step) * static_cast<double>(config.train.steps - step);
            const data::DataPosition position = task->position();
            spdlog::info("step {:>7}/{}  epoch {}  loss {:.4f}  lr {:.3e}  |g| {:.3f}  {:.0f} tok/s  elapsed {}  eta {}", step,
                         config.train.steps, position.epoch, portable(window_loss / static_cast<double>(window_steps)),
                         portable(learning_rate), portable(grad_norm), portable(tokens_per_second), format_duration(elapsed),
                         format_duration(eta));
            metrics << Json{{"step", step},
                            {"epoch", position.epoch},
                            {"loss", window_loss / static_cast<double>(window_steps)},
                            {"learning_rate", learning_rate},
                            {"grad_norm", grad_norm},
                            {"tokens_per_second", tokens_per_second},
                            {"elapsed_seconds", elapsed},
                            {"hybrid_u", hybrid_weights()}}
                           .dump()
                    << "\n"
                    << std::flush;
            window_start = now;
            window_loss = 0.0;
            window_steps = window_tokens = 0;
        }
        bool keep_going = true;
        if (leader && config.validation.every > 0 && step % config.validation.every == 0) keep_going = validate();
        if (step % config.checkpoint.every == 0) {
            check_replicas();
            if (leader) save_step_checkpoint();
        }
        // All ranks stop at the same step: rank 0 alone decides early stopping, and a signal may reach
        // the ranks during different steps.
        std::array<double, 2> stop{keep_going ? 0.0 : 1.0, pending_signal.load() != 0 ? 1.0 : 0.0};
        if (distributed) world.sum(stop, fmt::format("step {}: stop?", step));
        keep_going = stop[0] == 0.0;
        if (!keep_going) {
            result.stopped_because = "early stopping";
            spdlog::info("early stopping: no improvement in {} validations", config.validation.patience);
            break;
        }
        if (options.stop_after_steps > 0 && step - first_step >= options.stop_after_steps && step < config.train.steps) {
            result.stopped_because = "stop-after";
            spdlog::info("stopping after {} steps of this run (--stop-after)", options.stop_after_steps);
            break;
        }
        if (stop[1] > 0.0) {
            result.stopped_because = "signal";
            const int signal = pending_signal.load();
            result.signal = signal;
            spdlog::warn("{}: writing a checkpoint and stopping",
                         signal != 0 ? fmt::format("received signal {}", signal) : "another rank received a signal");
            break;
        }
    }
    if (leader && result.stopped_because == "completed" &&
        (config.validation.every == 0 || step % config.validation.every != 0)) {
        validate();
    }
    if (step % config.checkpoint.every != 0) {
        check_replicas();
        if (leader) save_step_checkpoint();
    }
    result.steps = step;
    result.best_metric = best_metric;
    return result;
}

}  // namespace hnas::train
