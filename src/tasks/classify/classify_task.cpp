#include "tasks/classify/classify_task.h"

#include "base/number_format.h"
#include "data/glue.h"
#include "eval/glue_metrics.h"
#include "models/bert.h"
#include "tasks/classify/classify_options.h"
#include "tasks/task_support.h"

namespace hnas::tasks::classify {

namespace {

// Training reads its file shuffled and forever; validation, evaluation and prediction read theirs once,
// in length order (every row is computed alone, so the order changes nothing).
data::ClassificationDataOptions classification_data(const config::ExperimentConfig& config, const std::string& path,
                                                    bool training, bool with_labels = true) {
    data::ClassificationDataOptions o;
    o.path = path;
    const ClassifyOptions& classify = options(config);
    o.layout = classify.layout();
    o.labels = {classify.regression, classify.labels};
    o.max_seq = std::min(classify.max_seq, config.model.max_source_positions);
    o.damaged_lines = config.data.damaged_lines;
    o.shuffle = training;
    o.seed = config.seed;
    o.batch = {config.data.batch_sentences, config.data.batch_tokens, config.data.pad_multiple};
    o.epochs = training ? 0 : 1;
    o.with_labels = with_labels;
    if (training) o.same_class_templates = classify.same_class_templates;
    return o;
}

Var logits_of(const models::BertModel& model, const data::ClassificationBatch& b, const nn::TemplatePartners* partners = nullptr) {
    return model.class_logits(model.pooled(model.encode(b.input_ids, b.segment_ids, b.valid, partners)));
}

// The predictions over a batcher's examples and their gold values, in batch order.
struct Outcomes {
    std::vector<int32_t> predicted, gold;  // classes
    std::vector<double> outputs, targets;  // regression
    std::vector<int64_t> example_index;

    void add(const Tensor& logits, const data::ClassificationBatch& batch, bool regression) {
        example_index.insert(example_index.end(), batch.example_index.begin(), batch.example_index.end());
        if (regression) {
            for (int64_t i = 0; i < logits.numel(); ++i) {
                outputs.push_back(logits.data()[i]);
                targets.push_back(batch.targets.data()[i]);
            }
            return;
        }
        const std::vector<int32_t> classes = argmax_rows(logits);
        predicted.insert(predicted.end(), classes.begin(), classes.end());
        gold.insert(gold.end(), batch.labels.ints(), batch.labels.ints() + batch.labels.numel());
    }

    // GLUE's metrics: accuracy, F1 (two classes) and MCC, or Pearson and Spearman.
    std::vector<Metric> metrics(const ClassifyOptions& data) const {
        if (data.regression) return {{"pearson", eval::pearson(outputs, targets)}, {"spearman", eval::spearman(outputs, targets)}};
        std::vector<Metric> out{{"accuracy", eval::accuracy(predicted, gold)}};
        if (data.labels.size() == 2) out.push_back({"f1", eval::binary_f1(predicted, gold)});
        out.push_back({"mcc", eval::matthews_correlation(predicted, gold)});
        return out;
    }
};

class ClassifyTask : public Task {
public:
    ClassifyTask(const config::ExperimentConfig& config, const data::Tokenizer& tokenizer, Rng& init, Rng& dropout)
        : config_(config) {
        model_ = std::make_unique<models::BertModel>(config.model, init, dropout);
        train_ = std::make_unique<data::ClassificationBatcher>(tokenizer, data_options(options(config).files.train_file, true));
        if (!options(config).files.valid_file.empty()) {
            valid_ = std::make_unique<data::ClassificationBatcher>(tokenizer, data_options(options(config).files.valid_file, false));
            valid_start_ = valid_->position();
        }
    }

    models::Model& model() override { return *model_; }

    BatchTokens next_batch(int rank, int ranks) override {
        batch_ = *train_->next();
        return take_shard(batch_, rank, ranks, RowCount{});  // the loss is a mean over the rows
    }
    Var batch_loss(const BatchTokens& tokens) override { return shard_part(training_loss(), tokens.shard, tokens.global); }
    data::DataPosition position() const override { return train_->position(); }
    void restore(const data::DataPosition& position) override { train_->restore(position); }

    std::optional<Validation> validate() override {
        if (!valid_) return std::nullopt;
        EvaluationMode evaluation(*model_);
        Outcomes outcomes;
        Validation result = validation_loss(
            *valid_, valid_start_, config_.validation.max_batches,
            [&](const data::ClassificationBatch& b) {
                const Var logits = logits_of(*model_, b);
                outcomes.add(logits.value(), b, options(config_).regression);
                return loss_from(logits, b);
            },
            RowCount{});
        const std::vector<Metric> metrics = outcomes.metrics(options(config_));
        result.metrics.insert(result.metrics.end(), metrics.begin(), metrics.end());
        return result;
    }

private:
    data::ClassificationDataOptions data_options(const std::string& path, bool training) const {
        return classification_data(config_, path, training);
    }
    Var loss_from(const Var& logits, const data::ClassificationBatch& b) const {
        return options(config_).regression ? models::regression_loss(logits, b.targets) : ops::cross_entropy(logits, b.labels);
    }
    // Paper 003 §9: with template partners drawn, their rows run beside the batch's and only the
    // batch's own rows are scored.
    Var training_loss() const {
        if (batch_.template_partner.empty()) return loss_from(logits_of(*model_, batch_), batch_);
        const data::PartneredBatch extended = train_->with_template_partners(batch_);
        const nn::TemplatePartners partners{extended.partner_row};
        const Var logits = logits_of(*model_, extended.batch, &partners);
        return loss_from(ops::slice(logits, 0, 0, extended.inputs), batch_);
    }

    const config::ExperimentConfig& config_;
    std::unique_ptr<models::BertModel> model_;
    std::unique_ptr<data::ClassificationBatcher> train_, valid_;
    data::DataPosition valid_start_;
    data::ClassificationBatch batch_;
};

std::vector<DataFile> data_files(const config::ExperimentConfig& config) {
    const LabelledFiles& given = options(config).files;
    std::vector<DataFile> files{{"data.train_file", given.train_file, true}};
    if (!given.valid_file.empty()) files.push_back({"data.valid_file", given.valid_file, false});
    return files;
}

models::BatchShape largest_batch(const config::ExperimentConfig& config) {
    models::BatchShape batch;
    batch.source_length = std::min(options(config).max_seq, config.model.max_source_positions);
    batch.rows = rows_allowed(config.data, batch.source_length);
    batch.predicted_tokens = 0;  // the head's logits are a few per row
    return batch;
}

// Labels the config leaves to the data: the training file's, in order of first appearance. They join
// the resolved config, so checkpoints (and predictions from them) keep the label names and their ids.
void complete_config(config::ExperimentConfig& config) {
    ClassifyOptions& o = options_of<ClassifyOptions>(config, schema());
    if (!o.regression && o.labels.empty()) {
        try {
            o.labels = data::collect_label_names(o.files.train_file, o.layout(), config.data.damaged_lines);
        } catch (const Error& e) {
            throw Error(std::string("data.train_file: ") + e.what());
        }
        config.resolved["data"]["labels"] = o.labels;
    }
    HNAS_CHECK(o.regression || o.labels.size() >= 2, "config data.labels: classification needs two classes or more, got ",
               o.labels.size());
    HNAS_CHECK(config.validation.metric != "f1" || o.labels.size() == 2, "config validation.metric: f1 is ",
               "the binary F1 of class 1; these data have ", o.labels.size(), " classes");
    set_heads(config);
    check_same_class_templates(config, o.same_class_templates);
}

// Every example of `input` through the checkpoint's model.
struct InputOutcomes {
    Outcomes outcomes;
    std::vector<data::ClassificationExample> examples;
};
InputOutcomes run_input(const TrainedCheckpoint& trained, const std::string& input, bool with_labels) {
    const LoadedModel<models::BertModel> loaded = load_model<models::BertModel>(trained);
    data::ClassificationBatcher batcher(trained.tokenizer, classification_data(trained.config, input, false, with_labels));
    NoGradScope no_grad;
    InputOutcomes result;
    while (auto batch = batcher.next()) result.outcomes.add(logits_of(*loaded.model, *batch).value(), *batch, options(trained.config).regression);
    result.examples = batcher.examples();
    return result;
}

// GLUE's metrics of a labelled run, beside the majority-class baseline.
Json report_of(const InputOutcomes& run, const ClassifyOptions& classify) {
    Json report = {{"examples", run.examples.size()}};
    for (const Metric& metric : run.outcomes.metrics(classify)) report[metric.name] = metric.value;
    if (!classify.regression) {
        std::vector<int64_t> counts(classify.labels.size(), 0);
        for (int32_t label : run.outcomes.gold) ++counts[static_cast<size_t>(label)];
        const auto majority = std::max_element(counts.begin(), counts.end());
        report["majority_class"] = classify.labels[static_cast<size_t>(majority - counts.begin())];
        report["majority_baseline_accuracy"] = static_cast<double>(*majority) / static_cast<double>(run.outcomes.gold.size());
    }
    return report;
}

Json score_file(const TrainedCheckpoint& trained, const std::string& input) {
    return report_of(run_input(trained, input, true), options(trained.config));
}

// hnas test on test.file: the metrics, and for classification each example's correctness in file order
// (1 or 0, what the paired bootstrap over test examples resamples; its mean is the accuracy).
TestResult test(const TrainedCheckpoint& trained) {
    const ClassifyOptions& classify = options(trained.config);
    HNAS_CHECK(!classify.test_file.empty(), "test: the classify run's config names no test file: set test.file (or data.valid_file)");
    const InputOutcomes run = run_input(trained, classify.test_file, true);
    TestResult result;
    result.metrics = report_of(run, classify);
    result.settings = {{"file", classify.test_file}};
    if (!classify.regression) {
        std::vector<double>& correct = result.per_example["accuracy"];
        correct.assign(run.examples.size(), 0.0);
        for (size_t row = 0; row < run.outcomes.example_index.size(); ++row) {
            correct[static_cast<size_t>(run.outcomes.example_index[row])] = run.outcomes.predicted[row] == run.outcomes.gold[row] ? 1.0 : 0.0;
        }
    }
    return result;
}

// One line per example of `input`, in file order: the predicted label name, or the regression output.
std::string predict(const TrainedCheckpoint& trained, const std::string& input) {
    const InputOutcomes run = run_input(trained, input, false);
    std::vector<std::string> lines(run.examples.size());
    const ClassifyOptions& data = options(trained.config);
    for (size_t row = 0; row < run.outcomes.example_index.size(); ++row) {
        const auto example = static_cast<size_t>(run.outcomes.example_index[row]);
        lines[example] = data.regression ? fmt::format("{}", portable(run.outcomes.outputs[row]))
                                         : data.labels[static_cast<size_t>(run.outcomes.predicted[row])];
    }
    std::string text;
    for (const std::string& line : lines) text.append(line).append("\n");
    return text;
}

std::unique_ptr<Task> create(const config::ExperimentConfig& config, const data::Tokenizer& tokenizer, Rng& init, Rng& dropout) {
    return std::make_unique<ClassifyTask>(config, tokenizer, init, dropout);
}

}  // namespace

const TaskDefinition& definition() {
    static const TaskDefinition classify{
        .schema = &schema(),
        .data_files = data_files,
        .largest_batch = largest_batch,
        .memory_model_keys = "",
        .memory_data_keys = "data.max_seq",
        .target_unit = "examples",
        .complete_config = complete_config,
        .create = create,
        .evaluate = evaluate_file<score_file>,
        .predict = predict,
        .predictions_suffix = ".predictions",
        .outputs_command = nullptr,
        .test = test,
        .fixed_tokenizer = nullptr,
        .encoder_ids = bert_encoder_ids,
        .prepare = nullptr,
    };
    return classify;
}

}  // namespace hnas::tasks::classify
