#include "tasks/classify/classify_task.h"

#include "data/glue.h"
#include "eval/glue_metrics.h"
#include "models/bert.h"
#include "tasks/task_support.h"

namespace hnas::tasks::classify {

namespace {

data::TsvLayout layout_of(const config::DataConfig& data) {
    return {data.text_a_column, data.text_b_column, data.label_column, data.header};
}

// The class of every row's largest logit. logits (B, C)
std::vector<int32_t> predicted_classes(const Tensor& logits) {
    std::vector<int32_t> classes;
    const int64_t columns = logits.dim(1);
    for (int64_t r = 0; r < logits.dim(0); ++r) {
        const float* row = logits.data() + r * columns;
        classes.push_back(static_cast<int32_t>(std::max_element(row, row + columns) - row));
    }
    return classes;
}

class ClassifyTask : public Task {
public:
    ClassifyTask(const config::ExperimentConfig& config, const data::Tokenizer& tokenizer, Rng& init, Rng& dropout)
        : config_(config) {
        model_ = std::make_unique<models::BertModel>(config.model, init, dropout);
        train_ = std::make_unique<data::ClassificationBatcher>(tokenizer, data_options(config.data.train_file, true));
        if (!config.data.valid_file.empty()) {
            valid_ = std::make_unique<data::ClassificationBatcher>(tokenizer, data_options(config.data.valid_file, false));
            valid_start_ = valid_->position();
        }
    }

    models::Model& model() override { return *model_; }

    BatchTokens next_batch(int rank, int ranks) override {
        batch_ = *train_->next();
        struct {  // the loss is a mean over the examples
            int64_t operator()(const data::ClassificationBatch& b) const { return b.input_ids.dim(0); }
            int64_t rows(const data::ClassificationBatch& b) const { return b.input_ids.dim(0); }
        } count_of;
        tokens_ = take_shard(batch_, rank, ranks, count_of);
        return tokens_;
    }
    Var batch_loss() override { return shard_part(loss_of(batch_), tokens_.shard, tokens_.global); }
    data::DataPosition position() const override { return train_->position(); }
    void restore(const data::DataPosition& position) override { train_->restore(position); }

    std::optional<Validation> validate() override {
        if (!valid_) return std::nullopt;
        EvaluationMode evaluation(*model_);
        std::vector<int32_t> predicted, gold;
        std::vector<double> outputs, targets;
        Validation result = validation_loss(
            *valid_, valid_start_, config_.validation.max_batches,
            [&](const data::ClassificationBatch& b) {
                const Var logits = logits_of(b);
                if (config_.data.regression) {
                    for (int64_t i = 0; i < logits.value().numel(); ++i) {
                        outputs.push_back(logits.value().data()[i]);
                        targets.push_back(b.targets.data()[i]);
                    }
                } else {
                    const std::vector<int32_t> classes = predicted_classes(logits.value());
                    predicted.insert(predicted.end(), classes.begin(), classes.end());
                    gold.insert(gold.end(), b.labels.ints(), b.labels.ints() + b.labels.numel());
                }
                return loss_from(logits, b);
            },
            [](const data::ClassificationBatch& b) { return b.input_ids.dim(0); });
        if (config_.data.regression) {
            result.metrics.push_back({"pearson", eval::pearson(outputs, targets)});
            result.metrics.push_back({"spearman", eval::spearman(outputs, targets)});
        } else {
            result.metrics.push_back({"accuracy", eval::accuracy(predicted, gold)});
            if (config_.data.labels.size() == 2) result.metrics.push_back({"f1", eval::binary_f1(predicted, gold)});
            result.metrics.push_back({"mcc", eval::matthews_correlation(predicted, gold)});
        }
        return result;
    }

private:
    data::ClassificationDataOptions data_options(const std::string& path, bool training) const {
        data::ClassificationDataOptions o;
        o.path = path;
        o.layout = layout_of(config_.data);
        o.labels = {config_.data.regression, config_.data.labels};
        o.max_seq = std::min(config_.data.max_seq, config_.model.max_source_positions);
        o.damaged_lines = config_.data.damaged_lines;
        o.shuffle = training;
        o.seed = config_.seed;
        o.batch = {config_.data.batch_sentences, config_.data.batch_tokens};
        o.epochs = training ? 0 : 1;
        return o;
    }

    Var logits_of(const data::ClassificationBatch& b) const {
        return model_->class_logits(model_->pooled(model_->encode(b.input_ids, b.segment_ids, b.valid)));
    }
    Var loss_from(const Var& logits, const data::ClassificationBatch& b) const {
        return config_.data.regression ? models::regression_loss(logits, b.targets) : ops::cross_entropy(logits, b.labels);
    }
    Var loss_of(const data::ClassificationBatch& b) const { return loss_from(logits_of(b), b); }

    const config::ExperimentConfig& config_;
    std::unique_ptr<models::BertModel> model_;
    std::unique_ptr<data::ClassificationBatcher> train_, valid_;
    data::DataPosition valid_start_;
    data::ClassificationBatch batch_;
    BatchTokens tokens_;
};

std::vector<DataFile> data_files(const config::ExperimentConfig& config) {
    std::vector<DataFile> files{{"data.train_file", config.data.train_file, true}};
    if (!config.data.valid_file.empty()) files.push_back({"data.valid_file", config.data.valid_file, false});
    return files;
}

models::BatchShape largest_batch(const config::ExperimentConfig& config) {
    models::BatchShape batch;
    batch.source_length = std::min(config.data.max_seq, config.model.max_source_positions);
    batch.rows = rows_allowed(config.data, batch.source_length);
    batch.predicted_tokens = 0;  // the head's logits are a few per row
    return batch;
}

// Labels the config leaves to the data: the training file's, in order of first appearance. They join
// the resolved config, so checkpoints (and predictions from them) keep the label names and their ids.
void complete_config(config::ExperimentConfig& config) {
    if (!config.data.regression && config.data.labels.empty()) {
        try {
            config.data.labels = data::collect_label_names(config.data.train_file, layout_of(config.data), config.data.damaged_lines);
        } catch (const Error& e) {
            throw Error(std::string("data.train_file: ") + e.what());
        }
        config.resolved["data"]["labels"] = config.data.labels;
    }
    HNAS_CHECK(config.data.regression || config.data.labels.size() >= 2, "config data.labels: classification needs two ",
               "classes or more, got ", config.data.labels.size());
    HNAS_CHECK(config.validation.metric != "f1" || config.data.labels.size() == 2, "config validation.metric: f1 is ",
               "the binary F1 of class 1; these data have ", config.data.labels.size(), " classes");
    config::set_bert_heads(config);
}

std::unique_ptr<Task> create(const config::ExperimentConfig& config, const data::Tokenizer& tokenizer, Rng& init, Rng& dropout) {
    return std::make_unique<ClassifyTask>(config, tokenizer, init, dropout);
}

}  // namespace

const TaskDefinition& definition() {
    static const TaskDefinition classify{config::Task::classify, data_files, largest_batch, "", "data.max_seq",
                                         complete_config, create};
    return classify;
}

}  // namespace hnas::tasks::classify
