// A training objective behind one interface. A Task owns everything specific to it: its model (built
// from the config), its batchers, its loss, how many tokens a batch counts, and its validation metrics.
// The trainer (src/train/) knows tasks only through this header.
//
// Adding a task: a folder src/tasks/<name>/ holding its options (<name>_options.h: their struct, parsing,
// defaults and metrics behind a config::TaskSchema), its Task and its TaskDefinition, and one line in
// src/tasks/registry.cpp; its data reader goes under src/data/ if the data is new.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "autograd/variable.h"
#include "config/experiment_config.h"
#include "data/batching.h"
#include "data/prepared_text.h"
#include "data/tokenizer.h"
#include "tasks/trained_model.h"
#include "models/memory_estimate.h"
#include "models/model.h"
#include "models/model_io.h"

namespace hnas::tasks {

// What a global batch holds, for the loss and for throughputs. `global` and `shard` count its
// targets, the units the loss is a mean over (the definition's target_unit), in the whole batch and in
// this rank's shard of it (shard 0: this rank has no rows); `input` counts the real (unpadded) tokens
// the model reads from the whole batch (headline: source and target tokens).
struct BatchTokens {
    int64_t global = 0, shard = 0, input = 0;
    // A batcher that builds only this rank's rows cannot count the others': `global` and `input` then
    // count this shard too, and the trainer sums them over the ranks before the loss is taken.
    bool sum_over_ranks = false;
};

struct Metric {
    std::string name;  // as validation.metric names it: "loss", "rouge_l", "accuracy", ...
    double value = 0.0;
};

struct Validation {
    double loss = 0.0;               // mean over the loss-bearing tokens of the validation set
    int64_t tokens = 0;
    std::vector<Metric> metrics;     // "loss" first, then the task's own
    // The named metric; throws naming the metrics there are.
    double metric(const std::string& name) const;
};

class Task {
public:
    virtual ~Task() = default;

    virtual models::Model& model() = 0;
    // Loads this rank's shard of the next global training batch for batch_loss().
    virtual BatchTokens next_batch(int rank, int ranks) = 0;
    // This shard's part of the global batch's mean loss, given the batch's counts (summed over the ranks
    // when next_batch asked for it): the parts of all ranks sum to the loss one process computes over
    // the whole batch (and so do their gradients).
    virtual Var batch_loss(const BatchTokens& tokens) = 0;
    // Where the training batches are, for checkpoints.
    virtual data::DataPosition position() const = 0;
    virtual void restore(const data::DataPosition& position) = 0;
    // This shard's batch as next_batch() loaded it, as named tensors (data/batch.h's field names), for
    // tools that replay a run's batches elsewhere: `hnas-bench batches` hands them to the PyTorch twin
    // (scripts/torch_reference.py --batches). The headline and mlm tasks have it; the others throw.
    virtual std::vector<std::pair<std::string, Tensor>> batch_tensors() const;
    // Loss and metrics on the validation data, dropout off; nullopt when the config gives none.
    virtual std::optional<Validation> validate() = 0;
    // A fixed batch of validation inputs as text (headline: the first articles; mlm: the first lines of
    // the first validation source), on which observers of the training run (analysis/training_observers.h)
    // measure the attention diagnostics at each validation; empty: none.
    virtual std::vector<std::string> diagnostic_texts() const { return {}; }
    // For a task whose inputs are not text: a forward pass over a fixed batch of its validation inputs,
    // on which the observers measure the same diagnostics; empty: none.
    virtual models::DiagnosticForward diagnostic_forward() { return {}; }
    // A new run's start from `init_from`: by default every parameter the checkpoint holds by name
    // (heads it lacks start fresh).
    virtual models::InitReport initialize_from(const io::Checkpoint& pretrained) {
        return models::initialize_by_name(pretrained, model());
    }
};

// What `hnas test` measures of a trained checkpoint on the config's test data (config section test).
struct TestResult {
    Json metrics;  // name → value; ROUGE F1 in % as the papers' tables give it
    // For a metric that is a mean over test examples (ROUGE F1), its value per example in file order:
    // what the paired bootstrap over test examples resamples (Koehn 2004).
    std::map<std::string, std::vector<double>> per_example;
    Json settings;  // the files and decoding the test used
    std::vector<std::string> outputs;  // headline: the best headline per test article; else empty
};

// What `hnas eval` was given beside the checkpoint; each task reads the fields it needs.
struct EvaluationRequest {
    std::string input;        // the file scored (classify: a TSV in the training data's layout; span: SQuAD JSON; headline: articles)
    std::string references;   // what generated outputs are scored against, one per line
    std::string predictions;  // where generated outputs go
    Json options;             // the task's own settings given on the command line, which the task reads (headline: decoding, rouge)
};

// What `hnas eval` reports: the task's fields of the JSON report, and the text it prints.
struct Evaluation {
    Json report;
    std::string summary;
};

// A text file the config reads, with the key that names it in errors.
struct DataFile {
    std::string key, path;
    bool training;  // a training file must hold text; training files also train a new tokenizer
};

// What the trainer needs of a task before it builds anything, from the config alone.
struct TaskDefinition {
    const config::TaskSchema* schema;  // its config keys, defaults and metrics (<name>_options.h)
    std::vector<DataFile> (*data_files)(const config::ExperimentConfig& config);
    // The largest batch the data settings allow, for the memory estimate.
    models::BatchShape (*largest_batch)(const config::ExperimentConfig& config);
    // The config keys that drive the memory estimate besides the model's width, heads, encoder layers
    // and the batch size: the task's own model keys (", model.decoder_layers" or "") and data keys.
    const char* memory_model_keys;
    const char* memory_data_keys;
    // What BatchTokens::global counts, plural, for throughputs ("target tokens", "examples").
    const char* target_unit;
    // Fills in what the config leaves to the data (the classes of a classification file), before
    // anything else reads the config; null when the config is complete as parsed.
    void (*complete_config)(config::ExperimentConfig& config);
    // Builds the model (parameters drawn from init_rng, dropout masks from dropout_rng) and the batchers.
    std::unique_ptr<Task> (*create)(const config::ExperimentConfig& config, const data::Tokenizer& tokenizer,
                                    Rng& init_rng, Rng& dropout_rng);
    // hnas eval on a checkpoint of this task; null for a task without it. Classify and span score a
    // labelled file; headline decodes articles and scores them with ROUGE against references.
    Evaluation (*evaluate)(const TrainedCheckpoint& trained, const EvaluationRequest& request);
    // hnas predict: the predictions for an input file in the task's format, as the file to write; null
    // for a task without it (headline generation has hnas decode).
    std::string (*predict)(const TrainedCheckpoint& trained, const std::string& input);
    // What hnas predict appends to the input's path to name its output by default (".predictions");
    // null without predict.
    const char* predictions_suffix;
    // For a task without predict whose outputs another command writes: that command ("hnas decode"); else null.
    const char* outputs_command;
    // `hnas test`: the checkpoint scored on its config's test data (headline: beam search and ROUGE;
    // mlm: the validation loss; classify and span: `evaluate` on test.file).
    TestResult (*test)(const TrainedCheckpoint& trained);
    // The tokenizer a task's data fixes (synthetic: its symbols), used instead of a trained one; null:
    // the config's tokenizer.
    data::Tokenizer (*fixed_tokenizer)(const config::ExperimentConfig& config);
    // A text as the ids the task's encoder reads, for the attention analyses (headline: the article's
    // pieces cut to data.max_source; the BERT tasks: [CLS] pieces [SEP]); null: its inputs are not text.
    std::vector<int32_t> (*encoder_ids)(const config::ExperimentConfig& config, const data::Tokenizer& tokenizer,
                                        const std::string& text);
    // `hnas prepare`: the training data tokenized once into `directory`, which data.prepared then names
    // (docs/data.md); null for a task whose data is read as it is.
    data::PrepareSummary (*prepare)(const config::ExperimentConfig& config, const data::Tokenizer& tokenizer,
                                    const std::string& directory, const data::PrepareOptions& options,
                                    const std::function<void(const data::PrepareProgress&)>& progress);
};

// The registry (registry.cpp): the definition of every task.
const TaskDefinition& task_definition(const config::TaskSchema& schema);
// Every task's config schema, in the registry's order.
const config::TaskSchemas& schemas();

// A config of any registered task (config::parse_experiment_config over schemas()).
config::ExperimentConfig parse_config(const Json& raw, config::KeyLog* log = nullptr);
// Reads the file, applies `overrides` ("model.layers=2"), then parses.
config::ExperimentConfig load_config(const std::string& path, const std::vector<std::string>& overrides = {});
// configs/README.md's key tables over every registered task (config::key_tables, config::with_key_tables).
std::string key_tables();
std::string with_key_tables(const std::string& document, const std::string& path);

// The config with what its task fills in from the data (TaskDefinition::complete_config).
config::ExperimentConfig completed_config(const config::ExperimentConfig& config);

}  // namespace hnas::tasks
