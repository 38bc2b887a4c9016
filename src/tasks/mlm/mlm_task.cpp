#include "tasks/mlm/mlm_task.h"

#include <cmath>

#include "base/read_file.h"
#include "data/mlm.h"
#include "models/bert.h"
#include "tasks/mlm/mlm_options.h"
#include "tasks/task_options.h"
#include "tasks/task_support.h"

namespace hnas::tasks::mlm {

namespace {

int64_t max_seq(const config::ExperimentConfig& config) {
    return std::min(options(config).max_seq, config.model.max_source_positions);
}

// How many predictions equal their labels; with `hits`, each one's 1 or 0 appended to it.
int64_t count_equal(const std::vector<int32_t>& predicted, const Tensor& labels, std::vector<double>* hits = nullptr) {
    int64_t equal = 0;
    for (size_t i = 0; i < predicted.size(); ++i) {
        const bool hit = predicted[i] == labels.ints()[i];
        equal += hit;
        if (hits) hits->push_back(hit ? 1.0 : 0.0);
    }
    return equal;
}

class MlmTask : public Task {
public:
    MlmTask(const config::ExperimentConfig& config, const data::Tokenizer& tokenizer, Rng& init, Rng& dropout)
        : config_(config) {
        model_ = std::make_unique<models::BertModel>(config.model, init, dropout);
        train_ = std::make_unique<data::MlmBatcher>(tokenizer, data_options(config, DataRole::train));
        if (!options(config).valid_sources.empty()) {
            valid_ = std::make_unique<data::MlmBatcher>(tokenizer, data_options(config, DataRole::validation));
            valid_start_ = valid_->position();
            for (const std::string& line : read_lines(options(config).valid_sources.front().path, "validation source")) {
                if (line.find_first_not_of(" \t") != std::string::npos) diagnostic_texts_.push_back(line);
                if (diagnostic_texts_.size() == kDiagnosticTexts) break;
            }
        }
    }

    models::Model& model() override { return *model_; }
    std::vector<std::string> diagnostic_texts() const override { return diagnostic_texts_; }

    // The batcher builds only this rank's rows (it reads nothing of the others'), so the masked tokens of
    // the whole batch are the ranks' sum.
    BatchTokens next_batch(int rank, int ranks) override {
        train_->share(rank, ranks);
        batch_ = *train_->next();
        const int64_t masked = batch_.masked_labels.numel();
        return {masked, batch_.input_ids.dim(0) > 0 ? masked : 0, batch_.tokens, ranks > 1};
    }
    std::vector<std::pair<std::string, Tensor>> batch_tensors() const override {
        return {{"input_ids", batch_.input_ids},          {"segment_ids", batch_.segment_ids},
                {"valid", batch_.valid},                  {"masked_positions", batch_.masked_positions},
                {"masked_labels", batch_.masked_labels}, {"sentence_order", batch_.sentence_order}};
    }

    // The masked-LM mean over the masked tokens and the sentence-order mean over the rows, each as
    // this shard's part of the global batch's mean.
    Var batch_loss(const BatchTokens& tokens) override {
        const Losses losses = losses_of(batch_);
        Var loss = shard_part(losses.masked_lm, tokens.shard, tokens.global);
        if (!losses.sentence_order.defined()) return loss;
        const Var order = shard_part(losses.sentence_order, batch_.input_ids.dim(0), batch_.batch_rows);
        return ops::add(loss, ops::scale(order, options(config_).sentence_order_weight));
    }

    data::DataPosition position() const override { return train_->position(); }
    void restore(const data::DataPosition& position) override { train_->restore(position); }

    std::optional<Validation> validate() override {
        if (!valid_) return std::nullopt;
        return evaluate(nullptr);
    }

    // The validation loss and accuracies; with `masked_token_hits`, each masked token's 1 (predicted) or 0
    // appended to it (the test's per-example scores).
    Validation evaluate(std::vector<double>* masked_token_hits) {
        EvaluationMode evaluation(*model_);
        int64_t masked = 0, masked_right = 0, rows = 0, order_right = 0;
        Validation result = validation_loss(
            *valid_, valid_start_, config_.validation.max_batches,
            [&](const data::MlmBatch& b) {
                const Losses losses = losses_of(b);
                masked += b.masked_labels.numel();
                masked_right += count_equal(argmax_rows(losses.mlm_logits.value()), b.masked_labels, masked_token_hits);
                if (losses.sentence_order.defined()) {
                    rows += b.sentence_order.numel();
                    order_right += count_equal(argmax_rows(losses.order_logits.value()), b.sentence_order);
                }
                return combined(losses);
            },
            [](const data::MlmBatch& b) { return b.masked_labels.numel(); });
        result.metrics.push_back({"mlm_accuracy", masked > 0 ? static_cast<double>(masked_right) / static_cast<double>(masked) : 0.0});
        if (rows > 0) result.metrics.push_back({"sop_accuracy", static_cast<double>(order_right) / static_cast<double>(rows)});
        return result;
    }

private:
    struct Losses {
        Var mlm_logits, masked_lm;
        Var order_logits, sentence_order;  // undefined without a sentence-order weight
    };

    Losses losses_of(const data::MlmBatch& b) const {
        Losses losses;
        const Var states = model_->encode(b.input_ids, b.segment_ids, b.valid);
        losses.mlm_logits = model_->mlm_logits(states, b.masked_positions);
        losses.masked_lm = ops::cross_entropy(losses.mlm_logits, b.masked_labels, models::kPadId);
        if (options(config_).sentence_order_weight > 0.0f) {
            losses.order_logits = model_->sentence_order_logits(model_->pooled(states));
            losses.sentence_order = ops::cross_entropy(losses.order_logits, b.sentence_order);
        }
        return losses;
    }

    // The validation loss of one batch: masked LM + weight × sentence order.
    Var combined(const Losses& losses) const {
        if (!losses.sentence_order.defined()) return losses.masked_lm;
        return ops::add(losses.masked_lm, ops::scale(losses.sentence_order, options(config_).sentence_order_weight));
    }

    const config::ExperimentConfig& config_;
    std::unique_ptr<models::BertModel> model_;
    std::unique_ptr<data::MlmBatcher> train_, valid_;
    data::DataPosition valid_start_;
    data::MlmBatch batch_;
    std::vector<std::string> diagnostic_texts_;
};

std::vector<DataFile> data_files(const config::ExperimentConfig& config) {
    std::vector<DataFile> files;
    // Prepared sources were checked when they were prepared; their text may be gone.
    for (size_t i = 0; options(config).prepared.empty() && i < options(config).train_sources.size(); ++i) {
        files.push_back({fmt::format("data.train_sources[{}].path", i), options(config).train_sources[i].path, true});
    }
    for (size_t i = 0; i < options(config).valid_sources.size(); ++i) {
        files.push_back({fmt::format("data.valid_sources[{}].path", i), options(config).valid_sources[i].path, false});
    }
    for (size_t i = 0; i < options(config).test_sources.size(); ++i) {
        files.push_back({fmt::format("test.sources[{}].path", i), options(config).test_sources[i].path, false});
    }
    return files;
}

models::BatchShape largest_batch(const config::ExperimentConfig& config) {
    models::BatchShape batch;
    batch.source_length = max_seq(config);
    batch.rows = rows_allowed(config.data, batch.source_length);
    batch.predicted_tokens =
        batch.rows * static_cast<int64_t>(std::ceil(options(config).masking.mask_prob * static_cast<double>(batch.source_length)));
    return batch;
}

std::unique_ptr<Task> create(const config::ExperimentConfig& config, const data::Tokenizer& tokenizer, Rng& init, Rng& dropout) {
    return std::make_unique<MlmTask>(config, tokenizer, init, dropout);
}

// A pretraining run's test is its validation loss (and accuracies) on test.sources, else on
// data.valid_sources; each masked token's 1 or 0 is its per-example score of mlm_accuracy.
TestResult test(const TrainedCheckpoint& trained) {
    config::ExperimentConfig config = trained.config;
    MlmOptions& scored = options_of<MlmOptions>(config, schema());
    if (!scored.test_sources.empty()) scored.valid_sources = scored.test_sources;
    HNAS_CHECK(!scored.valid_sources.empty(),
               "test: the mlm run's config has neither test.sources nor data.valid_sources, whose validation loss is its test");
    Rng init_rng(config.seed, 0), dropout_rng(0, 1);  // every parameter is then overwritten from the checkpoint
    MlmTask task(config, trained.tokenizer, init_rng, dropout_rng);
    models::load_parameters(trained.checkpoint, task.model());
    TestResult result;
    std::vector<double> hits;
    const Validation validation = task.evaluate(&hits);
    for (const Metric& metric : validation.metrics) result.metrics[metric.name] = metric.value;
    result.per_example["mlm_accuracy"] = hits;
    Json sources = Json::array();
    for (const data::TextSource& source : options(config).valid_sources) sources.push_back(source.path);
    result.settings = {{"sources", sources}};
    return result;
}

data::PrepareSummary prepare(const config::ExperimentConfig& config, const data::Tokenizer& tokenizer, const std::string& directory,
                             const data::PrepareOptions& settings, const std::function<void(const data::PrepareProgress&)>& progress) {
    data::PrepareOptions prepare_options = settings;
    prepare_options.damaged_lines = config.data.damaged_lines;
    return data::prepare_text(options(config).train_sources, tokenizer, directory, prepare_options, progress);
}

}  // namespace

data::MlmDataOptions data_options(const config::ExperimentConfig& config, DataRole role) {
    const bool training = role == DataRole::train;
    data::MlmDataOptions o;
    o.sources = training ? options(config).train_sources : options(config).valid_sources;
    if (training) {
        o.prepared = options(config).prepared;
        o.shuffle_sentences = options(config).shuffle_sentences;
        o.shuffle_regions = options(config).shuffle_regions;
    }
    o.max_seq = max_seq(config);
    // Validation keeps one document per sequence and the default masking, whatever the training
    // recipe, so that its masked-token accuracy compares across recipes.
    o.masking = training ? options(config).masking : data::MaskingOptions{};
    o.packing = training ? options(config).packing : data::Packing::document;
    o.damaged_lines = config.data.damaged_lines;
    o.shuffle = training;
    o.seed = training ? config.seed : config.seed + 1;
    o.batch = {config.data.batch_sentences, config.data.batch_tokens, config.data.pad_multiple};
    o.epochs = training ? 0 : 1;
    return o;
}

const TaskDefinition& definition() {
    static const TaskDefinition mlm{
        .schema = &schema(),
        .data_files = data_files,
        .largest_batch = largest_batch,
        .memory_model_keys = "",
        .memory_data_keys = "data.max_seq",
        .target_unit = "masked tokens",
        .complete_config = nullptr,
        .create = create,
        .evaluate = nullptr,
        .predict = nullptr,
        .predictions_suffix = nullptr,
        .outputs_command = nullptr,
        .test = test,
        .fixed_tokenizer = nullptr,
        .encoder_ids = bert_encoder_ids,
        .prepare = prepare,
    };
    return mlm;
}

}  // namespace hnas::tasks::mlm
