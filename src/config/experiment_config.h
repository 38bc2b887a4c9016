// The typed form of an experiment's JSON config. It is parsed once, at the edge, by
// parse_experiment_config; everything downstream takes plain values. This layer holds what every task
// shares; each task's own keys live in its folder (src/tasks/<name>/<name>_options.h) behind its
// TaskSchema. The defaults are the structs' initializers (and each task's defaults hook); what each key
// means is said where it is read, and `hnas inspect --defaults` prints both as configs/README.md's tables.
#pragma once

#include <string>
#include <vector>

#include "backend/matmul.h"
#include "base/config_node.h"
#include "config/task_schema.h"
#include "data/tokenizer.h"
#include "models/model_config.h"
#include "optim/optimizer.h"
#include "optim/schedule.h"

namespace hnas::config {

// Upper bounds of sizes, so that every product of them that the model, the batches and the memory
// estimate compute stays far inside int64, and token ids inside int32.
inline constexpr int64_t kMaxLength = int64_t{1} << 20;  // widths, sequence lengths, positions
inline constexpr int64_t kMaxLayers = 1024;
inline constexpr int64_t kMaxVocabulary = int64_t{1} << 30;
inline constexpr int64_t kMaxRows = int64_t{1} << 20;  // rows per batch
inline constexpr int64_t kMaxBatchTokens = int64_t{1} << 30;


// A string or a list of strings; empty when absent or [] (the resolved form, which checkpoints store).
std::vector<std::string> text_list(ConfigNode& node, const std::string& key, const Doc& doc);

// The tokenizer: an existing SentencePiece model or WordPiece vocab.txt, or a SentencePiece model
// trained at the start of a run from `inputs`.
struct TokenizerConfig {
    std::string model;  // empty: train one into the run directory
    int vocab_size = 8000;
    data::TokenizerType type = data::TokenizerType::unigram;
    std::vector<std::string> inputs;  // empty: the training data's text files
    int64_t input_sentence_size = 200000;
};

// The data keys every task shares; each task reads its files and sizes itself (its TaskSchema).
struct DataConfig {
    int64_t batch_sentences = 32, batch_tokens = 0, pad_multiple = 8;
    // Lines with invalid UTF-8 or control bytes (a file damaged by a crash): an error, or left out
    // with their count in the log.
    DamagedLines damaged_lines = DamagedLines::reject;
};

struct TrainConfig {
    optim::OptimizerOptions optimizer{.weight_decay = 0.01f};
    optim::ScheduleOptions schedule;  // total_steps = steps
    int64_t steps = 10000;
    int64_t gradient_accumulation = 1;
    double clip_norm = 1.0;           // 0: no clipping
    optim::ClipScope clip_scope = optim::ClipScope::global;
    int64_t log_every = 50;
    int threads = 0;                  // 0: all cores
    // Matrix products in f32 or bf16 (f32 master weights, everything else f32 either way).
    backend::MatmulPrecision precision = backend::MatmulPrecision::f32;
    // Under mpirun: seconds a rank waits in an operation with the other ranks before it ends the job.
    double collective_timeout = 600.0;
    // Under mpirun: gradients travel and are summed in bf16, half the bytes (docs/distributed.md).
    bool bf16_gradient_sums = false;
};

struct ValidationConfig {
    int64_t every = 500;              // steps between validations; 0: only at the end
    int64_t max_batches = 0;          // 0: the whole validation set
    std::string metric;               // "loss" is better lower, every other metric higher; default: the task's first
    int64_t patience = 0;             // stop after this many validations without improvement; 0: never
};

// Which checkpoint `hnas test` scores; what it scores it on is the task's (its test keys).
enum class TestCheckpoint { best, last };
inline constexpr EnumName<TestCheckpoint> kTestCheckpointNames[]{{TestCheckpoint::best, "best"}, {TestCheckpoint::last, "last"}};
constexpr const auto& enum_names(TestCheckpoint) { return kTestCheckpointNames; }

struct TestConfig {
    TestCheckpoint checkpoint = TestCheckpoint::best;
};

struct CheckpointConfig {
    int64_t every = 1000;             // steps between checkpoints (and one at the end)
    int64_t keep = 3;                 // most recent step checkpoints kept; best.ckpt is kept besides
};

struct ExperimentConfig {
    const TaskSchema* task = nullptr;
    uint64_t seed = 1;
    models::ModelConfig model;
    // A checkpoint a new run starts from: headline, an MLM checkpoint for ⟨BERT,BERT⟩ initialization;
    // the other tasks, the parameters it holds by name (a pretrained encoder).
    std::string init_from;
    TokenizerConfig tokenizer;
    DataConfig data;
    TrainConfig train;
    ValidationConfig validation;
    CheckpointConfig checkpoint;
    TestConfig test;
    TaskOptionsHolder task_options;  // the task's own keys, of its own type (src/tasks/<name>/)
    Json resolved;          // the whole config with every default filled in
};

// A config an earlier hnas saved (a checkpoint's, a run's config.json) in today's keys. ot_alpha, `ot`'s
// α of paper 003 Eq. 25, became the stack's `alpha` (Eq. 18, for every kind): at 1 it is dropped; in a
// stack of ot layers alone it becomes `alpha`; beside other kinds another value has no equivalent and
// is an error naming the key.
Json upgrade_saved_config(Json saved);

// Parses and validates `raw` for one of `tasks` (named by its "task" key); a `log` given collects every
// key read (for key_tables). The task layer's tasks::parse_config passes every registered task.
ExperimentConfig parse_experiment_config(const Json& raw, const TaskSchemas& tasks, KeyLog* log = nullptr);
// Reads the file, applies `overrides` ("model.layers=2"), then parses.
ExperimentConfig load_experiment_config(const std::string& path, const TaskSchemas& tasks,
                                        const std::vector<std::string>& overrides = {});

// Every key of every task's config as markdown tables (type, default, tasks, meaning), one per
// section, from the parser itself: what `hnas inspect --defaults` prints and configs/README.md holds.
std::string key_tables(const TaskSchemas& tasks);
// `document` with the text between its two key-table markers replaced by key_tables(); `path` names it
// in the error when the markers are missing.
std::string with_key_tables(const std::string& document, const std::string& path, const TaskSchemas& tasks);
// The markers around the generated tables in configs/README.md.
inline constexpr const char* kKeyTablesBegin =
    "<!-- key tables: generated by `hnas inspect --defaults --into configs/README.md` from the parser "
    "(src/config/experiment_config.cpp); edit the docs there, not here -->";
inline constexpr const char* kKeyTablesEnd = "<!-- end of the generated key tables -->";

}  // namespace hnas::config
