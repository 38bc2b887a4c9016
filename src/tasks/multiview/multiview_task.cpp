#include "tasks/multiview/multiview_task.h"

#include "base/hash.h"
#include "data/multiview.h"
#include "models/multiview.h"
#include "tasks/multiview/multiview_options.h"
#include "tasks/task_support.h"

namespace hnas::tasks::multiview {

namespace {

static_assert(data::kMultiviewViews == models::kViews, "the data's views are the model's");

// The validation, diagnostic and test streams' seeds: fixed, so every run sees the same scenes.
constexpr uint64_t kValidationSeed = 0x7661'6c69'6400'0004ULL, kTestSeed = 0x7465'7374'0000'0005ULL;

data::MultiviewOptions stream(const config::ExperimentConfig& config, uint64_t seed) {
    const MultiviewOptions& d = options(config);
    data::MultiviewOptions o;
    o.objects_min = d.objects_min;
    o.objects_max = d.objects_max;
    o.colors = static_cast<int32_t>(d.colors);
    o.count_classes = static_cast<int32_t>(d.count_classes);
    o.primary_recall = static_cast<float>(d.primary_recall);
    o.width = config.model.width;
    o.batch = config.data.batch_sentences;
    o.seed = seed;
    return o;
}

// A batch's rows [first, last) as the model's inputs, with their labels and label parts.
struct Examples {
    models::MultiviewInput views;
    Tensor labels;
    std::vector<data::MultiviewLabel> parts;
};
Examples examples_of(const data::MultiviewBatch& batch, int64_t first, int64_t last) {
    const int64_t rows = last - first;
    Examples examples;
    for (size_t v = 0; v < examples.views.size(); ++v) {
        const data::ViewBoxes& boxes = batch.views[v];
        const auto feature_at = [&](int64_t row) { return boxes.features.begin() + row * boxes.boxes * batch.width; };
        const auto valid_at = [&](int64_t row) { return boxes.valid.begin() + row * boxes.boxes; };
        examples.views[v].features =
            Tensor::from_floats({rows, boxes.boxes, batch.width}, std::vector<float>(feature_at(first), feature_at(last)));
        examples.views[v].valid = Tensor::from_floats({rows, boxes.boxes}, std::vector<float>(valid_at(first), valid_at(last)));
    }
    examples.labels = Tensor::from_ints({rows}, std::vector<int32_t>(batch.labels.begin() + first, batch.labels.begin() + last));
    examples.parts.assign(batch.parts.begin() + first, batch.parts.begin() + last);
    return examples;
}
Examples examples_of(const data::MultiviewBatch& batch) { return examples_of(batch, 0, batch.rows); }

// Tallies a batch's right answers: the pair, and each part of it read off the predicted class.
constexpr size_t kColorPart = 0, kCountPart = 1;
void tally_batch(Tally& tally, const Tensor& logits, const Examples& examples, int32_t count_classes) {
    const std::vector<int32_t> predicted = argmax_rows(logits);
    for (size_t row = 0; row < predicted.size(); ++row) {
        const data::MultiviewLabel& truth = examples.parts[row];
        const bool color = predicted[row] / count_classes == truth.color, count = predicted[row] % count_classes == truth.count;
        tally.add(color && count);
        tally.add_part(kColorPart, color);
        tally.add_part(kCountPart, count);
    }
}
std::vector<Metric> metrics_of(const Tally& tally) {
    return {{"accuracy", tally.accuracy()},
            {"accuracy_color", tally.part_accuracy(kColorPart)},
            {"accuracy_count", tally.part_accuracy(kCountPart)}};
}

// Everything that draws the training batches.
uint64_t fingerprint(const data::MultiviewOptions& o) {
    uint64_t hash = mix64(static_cast<uint64_t>(o.objects_min));
    for (const uint64_t value : {static_cast<uint64_t>(o.objects_max), static_cast<uint64_t>(o.colors),
                                 static_cast<uint64_t>(o.count_classes), static_cast<uint64_t>(o.primary_recall * 1e6f),
                                 static_cast<uint64_t>(o.width), static_cast<uint64_t>(o.batch), o.seed}) {
        hash = hash_combine(hash, value);
    }
    return hash;
}

class MultiviewTask : public Task {
public:
    MultiviewTask(const config::ExperimentConfig& config, Rng& init, Rng& dropout)
        : config_(config),
          train_(stream(config, config.seed)),
          batches_("multiview", train_.options().batch, fingerprint(train_.options())),
          model_(std::make_unique<models::MultiviewModel>(config.model, init, dropout)) {
        const data::MultiviewGenerator validation(stream(config, kValidationSeed));
        for (int64_t k = 0; k < options(config).valid_batches; ++k) valid_.push_back(examples_of(validation.batch(static_cast<uint64_t>(k))));
    }

    models::Model& model() override { return *model_; }

    // The first validation batch (only its rows, which the attentions record).
    models::DiagnosticForward diagnostic_forward() override {
        return [this](size_t index) -> int64_t {
            if (index > 0) return 0;
            model_->logits(valid_.front().views);
            return valid_.front().labels.dim(0);
        };
    }

    BatchTokens next_batch(int rank, int ranks) override {
        const data::MultiviewBatch batch = train_.batch(batches_.take());
        const auto [first, last] = data::shard_rows(batch.rows, rank, ranks);
        if (first < last) shard_ = examples_of(batch, first, last);
        int64_t boxes = 0;
        for (const data::ViewBoxes& view : batch.views) {
            for (const float v : view.valid) boxes += v > 0.5f;
        }
        return {batch.rows, last - first, boxes};
    }

    Var batch_loss(const BatchTokens& tokens) override {
        if (tokens.shard == 0) return Var(Tensor::scalar(0.0f));
        return shard_part(ops::cross_entropy(model_->logits(shard_.views), shard_.labels), tokens.shard, tokens.global);
    }

    data::DataPosition position() const override { return batches_.position(); }
    void restore(const data::DataPosition& p) override { batches_.restore(p); }

    std::optional<Validation> validate() override {
        EvaluationMode evaluation(*model_);
        double weighted_loss = 0.0;
        Tally tally;
        for (const Examples& examples : valid_) {
            const Var logits = model_->logits(examples.views);
            weighted_loss += static_cast<double>(ops::cross_entropy(logits, examples.labels).item()) *
                             static_cast<double>(examples.labels.dim(0));
            tally_batch(tally, logits.value(), examples, train_.options().count_classes);
        }
        Validation result;
        result.tokens = tally.total;
        result.loss = weighted_loss / static_cast<double>(tally.total);
        result.metrics = {{"loss", result.loss}};
        for (const Metric& metric : metrics_of(tally)) result.metrics.push_back(metric);
        return result;
    }

    // `hnas test`: `batches` batches of the test stream.
    Tally test(int64_t batches) {
        EvaluationMode evaluation(*model_);
        const data::MultiviewGenerator test_stream(stream(config_, kTestSeed));
        Tally tally;
        for (int64_t k = 0; k < batches; ++k) {
            const Examples examples = examples_of(test_stream.batch(static_cast<uint64_t>(k)));
            tally_batch(tally, model_->logits(examples.views).value(), examples, train_.options().count_classes);
        }
        return tally;
    }

private:
    const config::ExperimentConfig& config_;
    data::MultiviewGenerator train_;
    GeneratedBatches batches_;
    std::unique_ptr<models::MultiviewModel> model_;
    std::vector<Examples> valid_;  // the fixed validation scenes, as the model reads them
    Examples shard_;
};

std::vector<DataFile> data_files(const config::ExperimentConfig&) { return {}; }

models::BatchShape largest_batch(const config::ExperimentConfig& config) {
    models::BatchShape batch;
    batch.rows = config.data.batch_sentences;
    batch.source_length = options(config).objects_max;
    return batch;
}

std::unique_ptr<Task> create(const config::ExperimentConfig& config, const data::Tokenizer&, Rng& init, Rng& dropout) {
    return std::make_unique<MultiviewTask>(config, init, dropout);
}

TestResult test(const TrainedCheckpoint& trained) {
    const config::ExperimentConfig& config = trained.config;
    Rng init_rng(config.seed, 0), dropout_rng(0, 1);  // every parameter is then overwritten from the checkpoint
    MultiviewTask task(config, init_rng, dropout_rng);
    models::load_parameters(trained.checkpoint, task.model());
    const Tally tally = task.test(options(config).test_batches);
    TestResult result;
    for (const Metric& metric : metrics_of(tally)) result.metrics[metric.name] = metric.value;
    result.per_example["accuracy"] = tally.correct;
    result.per_example["accuracy_color"] = tally.part_correct[kColorPart];
    result.per_example["accuracy_count"] = tally.part_correct[kCountPart];
    result.settings = {{"examples", tally.total}, {"stream", "test"}};
    return result;
}

// The task reads no text: its checkpoints carry a tokenizer of the special ids alone.
data::Tokenizer no_text(const config::ExperimentConfig&) { return data::Tokenizer::symbols(0); }

}  // namespace

const TaskDefinition& definition() {
    static const TaskDefinition multiview{
        .schema = &schema(),
        .data_files = data_files,
        .largest_batch = largest_batch,
        .memory_model_keys = "",
        .memory_data_keys = "data.objects_max",
        .target_unit = "examples",
        .complete_config = nullptr,
        .create = create,
        .evaluate = nullptr,
        .predict = nullptr,
        .predictions_suffix = nullptr,
        .outputs_command = nullptr,
        .test = test,
        .fixed_tokenizer = no_text,
        .encoder_ids = nullptr,
        .prepare = nullptr,
    };
    return multiview;
}

}  // namespace hnas::tasks::multiview
