#include "tasks/images/images_task.h"

#include "data/images.h"
#include "models/vit.h"
#include "tasks/images/images_options.h"
#include "tasks/task_support.h"

namespace hnas::tasks::images {

namespace {

data::ImageLayout layout_of(const ImagesOptions& d) { return {d.image_height, d.image_width, d.patch, d.pixel_max}; }

// Training reads its file shuffled and forever, drawing template partners; validation and test read
// theirs once, in file order, without partners.
data::ImageDataOptions image_data(const config::ExperimentConfig& config, const std::string& path, bool training) {
    data::ImageDataOptions o;
    o.path = path;
    o.layout = layout_of(options(config));
    o.shuffle = training;
    o.seed = config.seed;
    o.batch = config.data.batch_sentences;
    o.epochs = training ? 0 : 1;
    if (training) o.same_class_templates = options(config).same_class_templates;
    return o;
}

// Tallies a batch's right answers, per image in batch order.
void tally_batch(Tally& tally, const Tensor& logits, const Tensor& labels) {
    const std::vector<int32_t> predicted = argmax_rows(logits);
    for (size_t row = 0; row < predicted.size(); ++row) tally.add(predicted[row] == labels.ints()[row]);
}

class ImagesTask : public Task {
public:
    ImagesTask(const config::ExperimentConfig& config, Rng& init, Rng& dropout)
        : config_(config),
          model_(std::make_unique<models::VitModel>(config.model, init, dropout)),
          train_(image_data(config, options(config).files.train_file, true)) {
        if (!options(config).files.valid_file.empty()) {
            valid_ = std::make_unique<data::ImageBatcher>(image_data(config, options(config).files.valid_file, false));
            valid_start_ = valid_->position();
        }
    }

    models::Model& model() override { return *model_; }

    BatchTokens next_batch(int rank, int ranks) override {
        batch_ = *train_.next();
        const int64_t rows = batch_.patches.dim(0);
        const auto [first, last] = data::shard_rows(rows, rank, ranks);
        if (first < last && ranks > 1) batch_ = data::slice_rows(batch_, first, last);
        return {rows, last - first, rows * config_.model.image.patches};
    }

    // Paper 003 §9: with template partners drawn, their rows run beside the batch's and only the
    // batch's own rows are scored.
    Var batch_loss(const BatchTokens& tokens) override {
        if (tokens.shard == 0) return Var(Tensor::scalar(0.0f));
        Var logits;
        if (batch_.template_partner.empty()) {
            logits = model_->logits(model_->encode(batch_.patches));
        } else {
            const data::PartneredImageBatch extended = train_.with_template_partners(batch_);
            const nn::TemplatePartners partners{extended.partner_row};
            logits = ops::slice(model_->logits(model_->encode(extended.batch.patches, &partners)), 0, 0, extended.inputs);
        }
        return shard_part(ops::cross_entropy(logits, batch_.labels), tokens.shard, tokens.global);
    }

    data::DataPosition position() const override { return train_.position(); }
    void restore(const data::DataPosition& position) override { train_.restore(position); }

    std::optional<Validation> validate() override {
        if (!valid_) return std::nullopt;
        EvaluationMode evaluation(*model_);
        Tally tally;
        Validation result = validation_loss(
            *valid_, valid_start_, config_.validation.max_batches,
            [&](const data::ImageBatch& b) {
                const Var logits = model_->logits(model_->encode(b.patches));
                tally_batch(tally, logits.value(), b.labels);
                return ops::cross_entropy(logits, b.labels);
            },
            [](const data::ImageBatch& b) { return b.patches.dim(0); });
        result.metrics.push_back({"accuracy", tally.accuracy()});
        return result;
    }

    // The first validation batch, on which the trainer measures the attention diagnostics.
    models::DiagnosticForward diagnostic_forward() override {
        if (!valid_) return {};
        return [this](size_t index) -> int64_t {
            if (index > 0) return 0;
            valid_->restore(valid_start_);
            const data::ImageBatch batch = *valid_->next();
            model_->encode(batch.patches);
            return batch.patches.dim(0);
        };
    }

private:
    const config::ExperimentConfig& config_;
    std::unique_ptr<models::VitModel> model_;
    data::ImageBatcher train_;
    std::unique_ptr<data::ImageBatcher> valid_;
    data::DataPosition valid_start_;
    data::ImageBatch batch_;
};

std::vector<DataFile> data_files(const config::ExperimentConfig&) { return {}; }

models::BatchShape largest_batch(const config::ExperimentConfig& config) {
    models::BatchShape batch;
    batch.rows = config.data.batch_sentences;
    batch.source_length = config.model.image.patches + 1;
    return batch;
}

// The classes the config leaves to the data: one more than the training file's largest label. They join
// the resolved config, so checkpoints keep them.
void complete_config(config::ExperimentConfig& config) {
    ImagesOptions& o = options_of<ImagesOptions>(config, schema());
    if (o.classes == 0) {
        const data::ImageSet images = data::read_image_csv(o.files.train_file, layout_of(o));
        o.classes = 1 + *std::max_element(images.labels.begin(), images.labels.end());
        config.resolved["data"]["classes"] = o.classes;
    }
    HNAS_CHECK(o.classes >= 2, "config data.classes: classification needs two classes or more, got ", o.classes);
    set_model_output(config);
    check_same_class_templates(config, o.same_class_templates);
}

// Accuracy on a labelled file, and each image's right answer for paired comparisons.
TestResult test(const TrainedCheckpoint& trained) {
    const std::string& file = options(trained.config).test_file;
    HNAS_CHECK(!file.empty(), "test: the images run's config names no test file: set test.file (or data.valid_file)");
    const LoadedModel<models::VitModel> loaded = load_model<models::VitModel>(trained);
    data::ImageBatcher batcher(image_data(trained.config, file, false));
    NoGradScope no_grad;
    Tally tally;
    while (auto batch = batcher.next())
        tally_batch(tally, loaded.model->logits(loaded.model->encode(batch->patches)).value(), batch->labels);
    TestResult result;
    result.metrics = {{"accuracy", tally.accuracy()}, {"examples", tally.correct.size()}};
    result.per_example["accuracy"] = tally.correct;
    result.settings = {{"file", file}};
    return result;
}

std::unique_ptr<Task> create(const config::ExperimentConfig& config, const data::Tokenizer&, Rng& init, Rng& dropout) {
    return std::make_unique<ImagesTask>(config, init, dropout);
}

// The task reads no text: its checkpoints carry a tokenizer of the special ids alone.
data::Tokenizer no_text(const config::ExperimentConfig&) { return data::Tokenizer::symbols(0); }

}  // namespace

const TaskDefinition& definition() {
    static const TaskDefinition images{
        .schema = &schema(),
        .data_files = data_files,
        .largest_batch = largest_batch,
        .memory_model_keys = "",
        .memory_data_keys = "data.image_height, data.image_width, data.patch",
        .target_unit = "examples",
        .complete_config = complete_config,
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
    return images;
}

}  // namespace hnas::tasks::images
