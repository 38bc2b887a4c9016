#include "tasks/span/span_task.h"

#include <algorithm>
#include <limits>
#include <numeric>

#include "eval/squad_metrics.h"
#include "models/bert.h"
#include "tasks/span/span_options.h"
#include "tasks/task_support.h"

namespace hnas::tasks::span {

namespace {

constexpr size_t kBestIndices = 20;  // run_squad's n_best_size

// The indices of the n largest values, largest first.
std::vector<size_t> top_indices(const std::vector<float>& values, size_t n) {
    std::vector<size_t> order(values.size());
    std::iota(order.begin(), order.end(), 0);
    const size_t keep = std::min(n, order.size());
    std::partial_sort(order.begin(), order.begin() + static_cast<std::ptrdiff_t>(keep), order.end(),
                      [&](size_t a, size_t b) { return values[a] > values[b] || (values[a] == values[b] && a < b); });
    order.resize(keep);
    return order;
}

data::SpanDataOptions span_data(const config::ExperimentConfig& config, const std::string& path, bool training) {
    data::SpanDataOptions o;
    o.path = path;
    const SpanOptions& span = options(config);
    o.features = {std::min(span.max_seq, config.model.max_source_positions), span.doc_stride, span.max_query};
    o.shuffle = training;
    o.seed = config.seed;
    o.batch = {config.data.batch_sentences, config.data.batch_tokens, config.data.pad_multiple};
    o.epochs = training ? 0 : 1;
    return o;
}

models::SpanLogits logits_of(const models::BertModel& model, const data::SpanBatch& b) {
    return model.span_logits(model.encode(b.input_ids, b.segment_ids, b.valid), b.valid);
}

// The logits of each row of a batch, stored by feature, unpadded.
void keep_logits(const models::SpanLogits& logits, const data::SpanBatch& batch, std::vector<WindowLogits>& by_feature,
                 const std::vector<data::SpanFeature>& features) {
    const int64_t length = batch.input_ids.dim(1);
    for (size_t r = 0; r < batch.feature_index.size(); ++r) {
        const auto feature = static_cast<size_t>(batch.feature_index[r]);
        const auto size = static_cast<int64_t>(features[feature].ids.size());
        const float* start = logits.start.value().data() + static_cast<int64_t>(r) * length;
        const float* end = logits.end.value().data() + static_cast<int64_t>(r) * length;
        by_feature[feature] = {std::vector<float>(start, start + size), std::vector<float>(end, end + size)};
    }
}

std::vector<std::vector<std::string>> gold_answers(const data::SquadFile& file) {
    std::vector<std::vector<std::string>> gold;
    for (const auto& example : file.examples) {
        gold.emplace_back();
        for (const auto& answer : example.answers) gold.back().push_back(answer.text);
    }
    return gold;
}

std::vector<Metric> squad_metrics(const data::SquadFile& file, const std::vector<std::string>& answers) {
    const eval::SquadScores scores = eval::score_squad(gold_answers(file), answers);
    // As fractions, like every validation metric (the report of hnas eval gives the percentages).
    return {{"exact_match", scores.exact / 100.0}, {"f1", scores.f1 / 100.0}};
}

class SpanTask : public Task {
public:
    SpanTask(const config::ExperimentConfig& config, const data::Tokenizer& tokenizer, Rng& init, Rng& dropout) : config_(config) {
        model_ = std::make_unique<models::BertModel>(config.model, init, dropout);
        train_ = std::make_unique<data::SpanBatcher>(tokenizer, span_data(config, options(config).files.train_file, true));
        if (!options(config).files.valid_file.empty()) {
            valid_ = std::make_unique<data::SpanBatcher>(tokenizer, span_data(config, options(config).files.valid_file, false));
            valid_start_ = valid_->position();
        }
    }

    models::Model& model() override { return *model_; }

    BatchTokens next_batch(int rank, int ranks) override {
        batch_ = *train_->next();
        return take_shard(batch_, rank, ranks, RowCount{});  // the loss is a mean over the rows
    }
    Var batch_loss(const BatchTokens& tokens) override {
        return shard_part(models::span_loss(logits_of(*model_, batch_), batch_.start_positions, batch_.end_positions),
                          tokens.shard, tokens.global);
    }
    data::DataPosition position() const override { return train_->position(); }
    void restore(const data::DataPosition& position) override { train_->restore(position); }

    std::optional<Validation> validate() override {
        if (!valid_) return std::nullopt;
        EvaluationMode evaluation(*model_);
        std::vector<WindowLogits> by_feature(valid_->features().size());
        // Answers need every window of a question: the loss may stop at max_batches, the answers do not.
        Validation result = validation_loss(
            *valid_, valid_start_, 0,
            [&](const data::SpanBatch& b) {
                const models::SpanLogits logits = logits_of(*model_, b);
                keep_logits(logits, b, by_feature, valid_->features());
                return models::span_loss(logits, b.start_positions, b.end_positions);
            },
            RowCount{});
        const auto answers = best_answers(valid_->file(), valid_->features(), by_feature, options(config_).max_answer,
                                          options(config_).null_threshold);
        for (const Metric& metric : squad_metrics(valid_->file(), answers)) result.metrics.push_back(metric);
        return result;
    }

private:
    const config::ExperimentConfig& config_;
    std::unique_ptr<models::BertModel> model_;
    std::unique_ptr<data::SpanBatcher> train_, valid_;
    data::DataPosition valid_start_;
    data::SpanBatch batch_;
};

// The answers of the checkpoint for every question of a SQuAD file.
struct InputAnswers {
    data::SquadFile file;
    std::vector<std::string> answers;
};
InputAnswers answer_file(const TrainedCheckpoint& trained, const std::string& input) {
    const LoadedModel<models::BertModel> loaded = load_model<models::BertModel>(trained);
    data::SpanBatcher batcher(trained.tokenizer, span_data(trained.config, input, false));
    std::vector<WindowLogits> by_feature(batcher.features().size());
    NoGradScope no_grad;
    while (auto batch = batcher.next()) keep_logits(logits_of(*loaded.model, *batch), *batch, by_feature, batcher.features());
    auto answers = best_answers(batcher.file(), batcher.features(), by_feature, options(trained.config).max_answer,
                                options(trained.config).null_threshold);
    return {batcher.file(), std::move(answers)};
}

// The official script's report: exact and f1 in %, with the HasAns / NoAns splits under SQuAD 2.0.
Json score_file(const TrainedCheckpoint& trained, const std::string& input) {
    const InputAnswers run = answer_file(trained, input);
    const eval::SquadScores scores = eval::score_squad(gold_answers(run.file), run.answers);
    Json report = {{"exact", scores.exact}, {"f1", scores.f1}, {"total", scores.total}};
    if (scores.has_answer > 0) report.update({{"HasAns_exact", scores.has_answer_exact}, {"HasAns_f1", scores.has_answer_f1}, {"HasAns_total", scores.has_answer}});
    if (scores.no_answer > 0) report.update({{"NoAns_exact", scores.no_answer_exact}, {"NoAns_f1", scores.no_answer_f1}, {"NoAns_total", scores.no_answer}});
    return report;
}

// {"question id": "answer", ...} as SQuAD's predictions file ("" for no answer).
std::string predict(const TrainedCheckpoint& trained, const std::string& input) {
    const InputAnswers run = answer_file(trained, input);
    Json predictions = Json::object();
    for (size_t q = 0; q < run.answers.size(); ++q) predictions[run.file.examples[q].id] = run.answers[q];
    return predictions.dump(2) + "\n";
}

// SQuAD files are JSON (one line of megabytes), which the trainer's line checks do not apply to;
// read_squad checks them as the task starts, before the run writes anything.
std::vector<DataFile> data_files(const config::ExperimentConfig&) { return {}; }

models::BatchShape largest_batch(const config::ExperimentConfig& config) {
    models::BatchShape batch;
    batch.source_length = std::min(options(config).max_seq, config.model.max_source_positions);
    batch.rows = rows_allowed(config.data, batch.source_length);
    return batch;
}

std::unique_ptr<Task> create(const config::ExperimentConfig& config, const data::Tokenizer& tokenizer, Rng& init, Rng& dropout) {
    return std::make_unique<SpanTask>(config, tokenizer, init, dropout);
}

// test.file, for test_on_file.
const std::string& test_file(const config::ExperimentConfig& config) { return options(config).test_file; }

}  // namespace

std::vector<std::string> best_answers(const data::SquadFile& file, const std::vector<data::SpanFeature>& features,
                                      const std::vector<WindowLogits>& logits, int64_t max_answer, double null_threshold) {
    HNAS_CHECK(features.size() == logits.size(), "best answers: ", logits.size(), " windows of logits for ", features.size(), " windows");
    constexpr double kNone = -std::numeric_limits<double>::infinity();
    std::vector<double> best_score(file.examples.size(), kNone), null_score(file.examples.size(), std::numeric_limits<double>::infinity());
    std::vector<std::pair<int64_t, int64_t>> best_words(file.examples.size(), {-1, -1});
    for (size_t f = 0; f < features.size(); ++f) {
        const data::SpanFeature& feature = features[f];
        const WindowLogits& window = logits[f];
        const auto e = static_cast<size_t>(feature.example);
        null_score[e] = std::min(null_score[e], static_cast<double>(window.start[0]) + window.end[0]);
        for (size_t s : top_indices(window.start, kBestIndices)) {
            if (feature.word[s] < 0 || !feature.max_context[s]) continue;
            for (size_t t : top_indices(window.end, kBestIndices)) {
                if (feature.word[t] < 0 || t < s || static_cast<int64_t>(t - s + 1) > max_answer) continue;
                const double score = static_cast<double>(window.start[s]) + window.end[t];
                if (score > best_score[e]) {
                    best_score[e] = score;
                    best_words[e] = {feature.word[s], feature.word[t]};
                }
            }
        }
    }
    std::vector<std::string> answers(file.examples.size());
    for (size_t e = 0; e < file.examples.size(); ++e) {
        const data::SquadExample& example = file.examples[e];
        const bool no_span = best_words[e].first < 0;
        if (no_span || (file.version_2 && null_score[e] - best_score[e] > null_threshold)) continue;  // ""
        const size_t begin = example.words[static_cast<size_t>(best_words[e].first)].first;
        const size_t end = example.words[static_cast<size_t>(best_words[e].second)].second;
        answers[e] = example.context.substr(begin, end - begin);
    }
    return answers;
}

const TaskDefinition& definition() {
    static const TaskDefinition span{
        .schema = &schema(),
        .data_files = data_files,
        .largest_batch = largest_batch,
        .memory_model_keys = "",
        .memory_data_keys = "data.max_seq, data.doc_stride",
        .target_unit = "windows",
        .complete_config = nullptr,
        .create = create,
        .evaluate = evaluate_file<score_file>,
        .predict = predict,
        .predictions_suffix = ".predictions.json",
        .outputs_command = nullptr,
        .test = test_on_file<score_file, test_file>,
        .fixed_tokenizer = nullptr,
        .encoder_ids = bert_encoder_ids,
        .prepare = nullptr,
    };
    return span;
}

}  // namespace hnas::tasks::span
