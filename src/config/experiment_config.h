// The typed form of an experiment's JSON config (documented option by option in configs/README.md).
// It is parsed once, at the edge, by parse_experiment_config; everything downstream takes plain values.
#pragma once

#include <string>
#include <vector>

#include "backend/matmul.h"
#include "config/config_node.h"
#include "data/mlm.h"
#include "models/model_config.h"
#include "optim/optimizer.h"
#include "optim/schedule.h"

namespace hnas::config {

// The training objectives (src/tasks/), named in configs as "task": the one vocabulary of task names.
enum class Task { headline, mlm, classify, span };
const char* task_name(Task task);
std::vector<std::string> task_names();

// The tokenizer: an existing SentencePiece model or WordPiece vocab.txt, or a SentencePiece model
// trained at the start of a run from `inputs`.
struct TokenizerConfig {
    std::string model;                 // a .model file (wordpiece: a vocab.txt); empty: train one into the run directory
    int vocab_size = 8000;
    std::string type = "unigram";      // "unigram" or "bpe" (SentencePiece), or "wordpiece"
    std::vector<std::string> inputs;   // empty: the training data's text files
    int64_t input_sentence_size = 200000;
};

struct DataConfig {
    // headline
    std::string train_articles, train_titles, valid_articles, valid_titles;
    int64_t max_source = 128, max_target = 64, shuffle_buffer = 65536;
    // mlm
    std::vector<data::TextSource> train_sources, valid_sources;
    int64_t max_seq = 128;
    data::MaskingOptions masking;
    // classify (GLUE-style TSV files) and span (SQuAD JSON files)
    std::string train_file, valid_file;
    // classify: 0-based columns (text_b_column -1: single texts), a header line or not, the label names
    // in id order (empty: collected from train_file in order of first appearance), or one regression target
    int64_t text_a_column = 0, text_b_column = -1, label_column = 1;
    bool header = true;
    std::vector<std::string> labels;
    bool regression = false;
    // span: windows over long contexts every doc_stride pieces, questions cut to max_query pieces,
    // answers of at most max_answer pieces, SQuAD 2.0's no-answer when null − best span > null_threshold
    int64_t doc_stride = 128, max_query = 64, max_answer = 30;
    double null_threshold = 0.0;
    // every task
    int64_t batch_sentences = 32, batch_tokens = 0;
    // Lines with invalid UTF-8 or control bytes (a file damaged by a crash): an error, or left out
    // with their count in the log.
    DamagedLines damaged_lines = DamagedLines::reject;
};

struct TrainConfig {
    optim::OptimizerOptions optimizer;
    optim::ScheduleOptions schedule;  // total_steps = steps
    int64_t steps = 10000;
    int64_t gradient_accumulation = 1;
    double clip_norm = 1.0;           // 0: no clipping
    float label_smoothing = 0.1f;     // headline only
    // mlm only: the weight of ALBERT's sentence-order loss beside the masked-LM loss; 0: no SOP head.
    float sentence_order_weight = 1.0f;
    int64_t log_every = 50;
    int threads = 0;                  // 0: all cores
    // Matrix products in f32 or bf16 (f32 master weights, everything else f32 either way).
    backend::MatmulPrecision precision = backend::MatmulPrecision::f32;
    // Under mpirun: seconds a rank waits in an operation with the other ranks before it ends the job.
    double collective_timeout = 600.0;
};

struct ValidationConfig {
    int64_t every = 500;              // steps between validations; 0: only at the end
    int64_t max_batches = 0;          // 0: the whole validation set
    int64_t decode_examples = 200;    // headline: articles decoded greedily for ROUGE-L
    int64_t max_decode_length = 30;
    std::string metric = "loss";      // "loss" (lower is better) or "rouge_l" (headline, higher is better)
    int64_t patience = 0;             // stop after this many validations without improvement; 0: never
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
    Json resolved;          // the whole config with every default filled in
};

// The heads of a BERT-style model from the task and its options (also after a task fills in labels).
void set_bert_heads(ExperimentConfig& config);

// Parses and validates `raw`; `source` names the file in messages.
ExperimentConfig parse_experiment_config(const Json& raw);
// Reads the file, applies `overrides` ("model.layers=2"), then parses.
ExperimentConfig load_experiment_config(const std::string& path, const std::vector<std::string>& overrides = {});

}  // namespace hnas::config
