// The typed form of an experiment's JSON config. It is parsed once, at the edge, by
// parse_experiment_config; everything downstream takes plain values. The defaults are these structs'
// initializers (and defaults_for's changes per task); what each key means is said where it is read
// (experiment_config.cpp), and `hnas inspect --defaults` prints both as the tables of configs/README.md.
#pragma once

#include <string>
#include <vector>

#include "backend/matmul.h"
#include "config/config_node.h"
#include "data/mlm.h"
#include "data/synthetic.h"
#include "data/tokenizer.h"
#include "models/model_config.h"
#include "optim/optimizer.h"
#include "optim/schedule.h"

namespace hnas::config {

// The training objectives (src/tasks/), named in configs as "task": the one vocabulary of task names.
enum class Task { headline, mlm, classify, span, synthetic, multiview, images };
inline constexpr EnumName<Task> kTaskNames[]{{Task::headline, "headline"}, {Task::mlm, "mlm"},
                                             {Task::classify, "classify"}, {Task::span, "span"},
                                             {Task::synthetic, "synthetic"}, {Task::multiview, "multiview"},
                                             {Task::images, "images"}};
constexpr const auto& enum_names(Task) { return kTaskNames; }

// The tokenizer: an existing SentencePiece model or WordPiece vocab.txt, or a SentencePiece model
// trained at the start of a run from `inputs`.
struct TokenizerConfig {
    std::string model;  // empty: train one into the run directory
    int vocab_size = 8000;
    data::TokenizerType type = data::TokenizerType::unigram;
    std::vector<std::string> inputs;  // empty: the training data's text files
    int64_t input_sentence_size = 200000;
};

struct DataConfig {
    // headline
    std::string train_articles = "data/gigaword/derived/train_all.article.txt";
    std::string train_titles = "data/gigaword/derived/train_all.title.txt";
    std::string valid_articles = "data/gigaword/valid_1k/valid.article.filter.txt";
    std::string valid_titles = "data/gigaword/valid_1k/valid.title.filter.txt";
    int64_t max_source = 128, max_target = 64, shuffle_buffer = 65536;
    // mlm
    std::vector<data::TextSource> train_sources{{"data/corpus/moby_dick.txt", data::DocumentUnit::block}}, valid_sources;
    int64_t max_seq = 128;  // mlm, classify, span
    data::MaskingOptions masking;
    // classify (GLUE-style TSV files) and span (SQuAD JSON files)
    std::string train_file, valid_file;
    // classify: 0-based columns (text_b_column -1: single texts), a header line or not, the label names
    // in id order (empty: collected from train_file in order of first appearance), or one regression target
    int64_t text_a_column = 0, text_b_column = -1, label_column = 1;
    bool header = true;
    std::vector<std::string> labels;
    bool regression = false;
    // classify and images, paper 003 §9: the probability that a training example's template-comparing
    // layers (kind ot) also see the templates of a random other training example of its class; 0: never
    double same_class_templates = 0.0;
    // images (data/images.h; train_file and valid_file are CSV files): the images' size, the patches'
    // side, the pixels' full scale, and the classes (0: one more than the training file's largest label)
    int64_t image_height = 8, image_width = 8, patch = 2, classes = 0;
    double pixel_max = 16.0;
    // span: windows over long contexts every doc_stride pieces, questions cut to max_query pieces,
    // answers of at most max_answer pieces, SQuAD 2.0's no-answer when null − best span > null_threshold
    int64_t doc_stride = 128, max_query = 64, max_answer = 30;
    double null_threshold = 0.0;
    // synthetic (paper 002): the problem, its alphabet and lengths, where the output is read, and the
    // validation batches (drawn once, from a stream independent of the run's seed)
    data::SyntheticProblem problem = data::SyntheticProblem::case_distinction;
    int64_t symbols = 100, length = 128, valid_length = 64, valid_batches = 32;
    data::SyntheticOutput output = data::SyntheticOutput::every_position;
    // multiview (paper 004 §6.1, data/multiview.h): objects per scene, colors, the count's classes, and
    // the share of objects the primary view detects; valid_batches as for synthetic
    int64_t objects_min = 8, objects_max = 32, colors = 4, count_classes = 8;
    double primary_recall = 0.5;
    // every task
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
    float label_smoothing = 0.1f;     // headline only
    // mlm only: the weight of ALBERT's sentence-order loss beside the masked-LM loss; 0: no SOP head.
    float sentence_order_weight = 1.0f;
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
    int64_t decode_examples = 200;    // headline: articles decoded greedily for ROUGE-L
    int64_t max_decode_length = 30;
    std::string metric = "rouge_l";   // "loss" is better lower, every other metric higher (defaults_for: per task)
    int64_t patience = 0;             // stop after this many validations without improvement; 0: never
};

// What `hnas test` evaluates a finished run on (issue #16: each trial of a sweep is scored by it). The
// headline defaults are the standard Gigaword test set (data/gigaword/README.md).
enum class TestCheckpoint { best, last };
inline constexpr EnumName<TestCheckpoint> kTestCheckpointNames[]{{TestCheckpoint::best, "best"}, {TestCheckpoint::last, "last"}};
constexpr const auto& enum_names(TestCheckpoint) { return kTestCheckpointNames; }

// How headlines are decoded: the test section's settings, and what `hnas decode` and `hnas eval` use
// for every option they are not given. The defaults were chosen on the validation pairs
// (scripts/tune_decoding.sh, docs/main_job.md "Decoding settings").
struct DecodingConfig {
    int64_t beam = 8;             // 1: greedy
    double length_penalty = 1.0;  // A: hypotheses ranked by log P / (tokens + 1)^A; 0 ranks by log P
    int64_t min_length = 1;       // eos is not allowed before this many tokens
    int64_t max_length = 30;      // tokens before eos (also bounded by the model's target positions)
    int64_t no_repeat_ngram = 2;  // n > 0: no n-gram of pieces occurs twice in a hypothesis
};

struct TestConfig {
    TestCheckpoint checkpoint = TestCheckpoint::best;
    // headline: beam search over `articles`, scored against `references` with ROUGE-1.5.5 -m
    std::string articles = "data/gigaword/test_1951/input.txt";
    std::string references = "data/gigaword/test_1951/task1_ref0.txt";
    std::string wordnet = "data/wordnet";  // the exception lists of ROUGE's -m stemming
    DecodingConfig decoding;
    int64_t batch = 32;
    // classify and span: the labelled test file; empty: data.valid_file
    std::string file;
    // synthetic (at data.valid_length) and multiview: batches of a test stream of their own
    int64_t batches = 100;
};

struct CheckpointConfig {
    int64_t every = 1000;             // steps between checkpoints (and one at the end)
    int64_t keep = 3;                 // most recent step checkpoints kept; best.ckpt is kept besides
};

struct ExperimentConfig {
    Task task = Task::headline;
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
    Json resolved;          // the whole config with every default filled in
};

// The defaults of a task's config: the structs' initializers, with a BERT-style model, a longer
// sequence (span) and the task's validation metric where the task asks for them.
ExperimentConfig defaults_for(Task task);

// The heads of a BERT-style model from the task and its options (also after a task fills in labels).
void set_bert_heads(ExperimentConfig& config);
// A synthetic task's model output and positions, and a multiview task's classes, from its data options.
void set_task_output(ExperimentConfig& config);

// A config an earlier hnas saved (a checkpoint's, a run's config.json) in today's keys. ot_alpha, `ot`'s
// α of paper 003 Eq. 25, became the stack's `alpha` (Eq. 18, for every kind): at 1 it is dropped; in a
// stack of ot layers alone it becomes `alpha`; beside other kinds another value has no equivalent and
// is an error naming the key.
Json upgrade_saved_config(Json saved);

// Parses and validates `raw`; a `log` given collects every key read (for key_tables).
ExperimentConfig parse_experiment_config(const Json& raw, KeyLog* log = nullptr);
// Reads the file, applies `overrides` ("model.layers=2"), then parses.
ExperimentConfig load_experiment_config(const std::string& path, const std::vector<std::string>& overrides = {});

// Every key of every task's config as markdown tables (type, default, tasks, meaning), one per
// section, from the parser itself: what `hnas inspect --defaults` prints and configs/README.md holds.
std::string key_tables();
// `document` with the text between its two key-table markers replaced by key_tables(); `path` names it
// in the error when the markers are missing.
std::string with_key_tables(const std::string& document, const std::string& path);
// The markers around the generated tables in configs/README.md.
inline constexpr const char* kKeyTablesBegin =
    "<!-- key tables: generated by `hnas inspect --defaults --into configs/README.md` from the parser "
    "(src/config/experiment_config.cpp); edit the docs there, not here -->";
inline constexpr const char* kKeyTablesEnd = "<!-- end of the generated key tables -->";

}  // namespace hnas::config
