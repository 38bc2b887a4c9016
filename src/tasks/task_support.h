// What the tasks share: cutting a rank's shard out of a global batch, the mean validation loss over a
// batcher, the batch rows the data settings allow, and the tally of a classifier's right answers.
#pragma once

#include <algorithm>
#include <numeric>

#include "config/experiment_config.h"
#include "data/batch.h"
#include "ops/ops.h"
#include "tasks/task.h"

namespace hnas::tasks {

// Validation texts the attention diagnostics read (Task::diagnostic_texts): one batch.
inline constexpr size_t kDiagnosticTexts = 32;

// The real (unpadded) tokens a model reads from a batch: what input tokens/s counts.
// TaskDefinition::encoder_ids of the tasks on the BERT-style encoder: [CLS] text [SEP], the text cut to
// the model's positions.
inline std::vector<int32_t> bert_encoder_ids(const config::ExperimentConfig& config, const data::Tokenizer& tokenizer,
                                             const std::string& text) {
    std::vector<int32_t> ids = tokenizer.encode(text);
    const auto longest = static_cast<size_t>(config.model.max_source_positions - 2);
    if (ids.size() > longest) ids.resize(longest);
    ids.insert(ids.begin(), data::kClsId);
    ids.push_back(data::kSepId);
    return ids;
}

inline int64_t input_tokens(const data::Seq2SeqBatch& batch) { return batch.source_tokens + batch.target_tokens; }
template <typename Batch>
int64_t input_tokens(const Batch& batch) {
    return batch.tokens;
}

// Keeps rank `rank`'s rows of a global batch (all of it for one rank). CountOf: count(batch) gives the
// loss-bearing tokens and rows(batch) the rows.
template <typename Batch, typename CountOf>
BatchTokens take_shard(Batch& batch, int rank, int ranks, CountOf count_of) {
    BatchTokens tokens{count_of(batch), count_of(batch), input_tokens(batch)};
    if (ranks == 1) return tokens;
    const auto [first, last] = data::shard_rows(count_of.rows(batch), rank, ranks);
    if (first == last) {
        tokens.shard = 0;
    } else {
        batch = data::slice_rows(batch, first, last);
        tokens.shard = count_of(batch);
    }
    return tokens;
}

// The count of take_shard for a loss that is a mean over the rows (examples, windows).
struct RowCount {
    template <typename Batch>
    int64_t operator()(const Batch& batch) const { return batch.input_ids.dim(0); }
    template <typename Batch>
    int64_t rows(const Batch& batch) const { return batch.input_ids.dim(0); }
};

// A shard's mean loss as its part of the global batch's mean: scaled by shard / global (one process:
// the loss itself).
Var shard_part(const Var& shard_mean, int64_t shard, int64_t global);

// The loss over a validation batcher from its start (at most max_batches batches), weighted by each
// batch's loss-bearing tokens. Visit(batch) may gather the task's metrics on the way.
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
    result.metrics.push_back({"loss", result.loss});
    return result;
}

// Where the training stream of a task whose batch k is drawn from (seed, k) alone stands (synthetic,
// multiview): the next batch's index, saved with a fingerprint of everything that draws the batches,
// so that a checkpoint of other data is refused on restore.
class GeneratedBatches {
public:
    GeneratedBatches(const char* task, int64_t rows, uint64_t fingerprint) : task_(task), rows_(rows), fingerprint_(fingerprint) {}
    uint64_t take() { return next_++; }  // the next batch's index
    data::DataPosition position() const {
        data::DataPosition p;
        p.batch = static_cast<int64_t>(next_);
        p.examples = p.batch * rows_;
        p.fingerprint = fingerprint_;
        return p;
    }
    void restore(const data::DataPosition& p) {
        HNAS_CHECK(p.fingerprint == fingerprint_, task_, " task: the checkpoint's data position belongs to other data (another ",
                   "problem, size, batch or seed)");
        next_ = static_cast<uint64_t>(p.batch);
    }

private:
    const char* task_;
    int64_t rows_;
    uint64_t fingerprint_;
    uint64_t next_ = 0;
};

// The class of every row's largest logit (the first on a tie). logits (N, C)
std::vector<int32_t> argmax_rows(const Tensor& logits);

// Right answers over a pass of a classifying task: the count, each example's 0/1 in order (a test's
// per-example record), and hits on numbered parts of the answer, which not every example need have (a
// rule of case distinction, one half of a multiview pair). A share of nothing is 0.
struct Tally {
    int64_t right = 0, total = 0;
    std::vector<double> correct;
    std::vector<std::vector<double>> part_correct;  // per part, 1 / 0 for each example it scored, in order

    void add(bool hit) {
        right += hit ? 1 : 0;
        ++total;
        correct.push_back(hit ? 1.0 : 0.0);
    }
    void add_part(size_t part, bool hit) {
        if (part >= part_correct.size()) part_correct.resize(part + 1);
        part_correct[part].push_back(hit ? 1.0 : 0.0);
    }
    double accuracy() const { return share(right, total); }
    int64_t part_count(size_t part) const {
        return part < part_correct.size() ? static_cast<int64_t>(part_correct[part].size()) : 0;
    }
    double part_accuracy(size_t part) const {
        if (part_count(part) == 0) return 0.0;
        const std::vector<double>& hits = part_correct[part];
        return std::accumulate(hits.begin(), hits.end(), 0.0) / static_cast<double>(hits.size());
    }

private:
    static double share(int64_t hits, int64_t tries) {
        return tries > 0 ? static_cast<double>(hits) / static_cast<double>(tries) : 0.0;
    }
};

// Rows of a batch of rows `length` tokens long under data.batch_sentences and data.batch_tokens.
int64_t rows_allowed(const config::DataConfig& data, int64_t length);

// Paper 003 §9's recipe needs a layer that weighs the partners' templates: throws, naming the key, when
// data.same_class_templates (`probability`) is on and no encoder layer's kind compares templates.
void check_same_class_templates(const config::ExperimentConfig& config, double probability);

// The checkpoint's model as the task's own type, in evaluation mode. The model's dropout layers keep a
// reference to the generator, which lives beside it.
template <typename ModelType>
struct LoadedModel {
    std::unique_ptr<Rng> dropout_rng = std::make_unique<Rng>(0, 1);
    std::unique_ptr<ModelType> model;
};
template <typename ModelType>
LoadedModel<ModelType> load_model(const TrainedCheckpoint& trained) {
    LoadedModel<ModelType> loaded;
    Rng init_rng(trained.config.seed, 0);  // every parameter is then overwritten from the checkpoint
    loaded.model = std::make_unique<ModelType>(trained.config.model, init_rng, *loaded.dropout_rng);
    models::load_parameters(trained.checkpoint, *loaded.model);
    loaded.model->set_training(false);
    return loaded;
}

// The test of a task that `Score`s a labelled file: its metrics on its test.file, which TestFile(config)
// gives.
template <Json (*Score)(const TrainedCheckpoint&, const std::string&), const std::string& (*TestFile)(const config::ExperimentConfig&)>
TestResult test_on_file(const TrainedCheckpoint& trained) {
    const std::string& file = TestFile(trained.config);
    HNAS_CHECK(!file.empty(), "test: the ", trained.config.task->name,
               " run's config names no test file: set test.file (or data.valid_file)");
    TestResult result;
    result.metrics = Score(trained, file);
    result.settings = {{"file", file}};
    return result;
}

// hnas eval of a task that `Score`s a labelled file (request.input): the metrics, and a line per metric.
template <Json (*Score)(const TrainedCheckpoint&, const std::string&)>
Evaluation evaluate_file(const TrainedCheckpoint& trained, const EvaluationRequest& request) {
    HNAS_CHECK(!request.input.empty(), "eval: ", trained.checkpoint.path(), " holds a ", trained.config.task->name,
               " model: give its labelled data with --input");
    Evaluation evaluation{{{"input", request.input}, {"metrics", Score(trained, request.input)}}, ""};
    for (const auto& [name, value] : evaluation.report.at("metrics").items()) {
        evaluation.summary += fmt::format("{:<28} {}\n", name, value.dump());
    }
    return evaluation;
}

// Turns dropout off for the lifetime of the scope (validation), and back on after.
class EvaluationMode {
public:
    explicit EvaluationMode(nn::Module& model) : model_(model) { model_.set_training(false); }
    ~EvaluationMode() { model_.set_training(true); }
    EvaluationMode(const EvaluationMode&) = delete;
    EvaluationMode& operator=(const EvaluationMode&) = delete;

private:
    NoGradScope no_grad_;
    nn::Module& model_;
};

}  // namespace hnas::tasks
