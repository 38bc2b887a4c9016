#include "tasks/headline/headline_task.h"

#include <spdlog/spdlog.h>

#include "base/read_file.h"
#include "data/gigaword.h"
#include "data/prepared_pairs.h"
#include "decode/headlines.h"
#include "eval/rouge.h"
#include "models/seq2seq.h"
#include "tasks/headline/headline_decode.h"
#include "tasks/headline/headline_options.h"
#include "tasks/task_support.h"

namespace hnas::tasks::headline {

namespace {

class HeadlineTask : public Task {
public:
    HeadlineTask(const config::ExperimentConfig& config, const data::Tokenizer& tokenizer, Rng& init, Rng& dropout)
        : config_(config), tokenizer_(tokenizer) {
        model_ = std::make_unique<models::Seq2SeqModel>(config.model, init, dropout);
        train_ = std::make_unique<data::Seq2SeqBatcher>(tokenizer, data_options(options(config).train_articles,
                                                                                options(config).train_titles, true));
        valid_ = std::make_unique<data::Seq2SeqBatcher>(tokenizer, data_options(options(config).valid_articles,
                                                                                options(config).valid_titles, false));
        valid_start_ = valid_->position();
        const auto articles = read_lines(options(config).valid_articles, "validation articles");
        const auto titles = read_lines(options(config).valid_titles, "validation titles");
        HNAS_CHECK(articles.size() == titles.size(), options(config).valid_articles, " has ", articles.size(), " lines but ",
                   options(config).valid_titles, " has ", titles.size(), " (the files changed while they were read)");
        const size_t count = std::min<size_t>(articles.size(), static_cast<size_t>(options(config).decode_examples));
        decode_articles_.assign(articles.begin(), articles.begin() + static_cast<std::ptrdiff_t>(count));
        decode_references_.assign(titles.begin(), titles.begin() + static_cast<std::ptrdiff_t>(count));
        diagnostic_texts_.assign(articles.begin(), articles.begin() + static_cast<std::ptrdiff_t>(
                                                                          std::min<size_t>(articles.size(), kDiagnosticTexts)));
    }

    models::Model& model() override { return *model_; }

    BatchTokens next_batch(int rank, int ranks) override {
        batch_ = *train_->next();  // the training stream never ends (epochs = 0)
        struct {
            int64_t operator()(const data::Seq2SeqBatch& b) const { return b.target_tokens; }
            int64_t rows(const data::Seq2SeqBatch& b) const { return b.source_ids.dim(0); }
        } count_of;
        return take_shard(batch_, rank, ranks, count_of);
    }
    Var batch_loss(const BatchTokens& tokens) override { return shard_part(loss_of(batch_), tokens.shard, tokens.global); }
    std::vector<std::pair<std::string, Tensor>> batch_tensors() const override {
        return {{"source_ids", batch_.source_ids},     {"source_valid", batch_.source_valid},
                {"target_input", batch_.target_input}, {"target_output", batch_.target_output},
                {"target_valid", batch_.target_valid}};
    }
    data::DataPosition position() const override { return train_->position(); }
    void restore(const data::DataPosition& position) override { train_->restore(position); }

    // ⟨BERT,BERT⟩: encoder and decoder both start from a masked-LM encoder (models/model_io.h).
    models::InitReport initialize_from(const io::Checkpoint& pretrained) override {
        return models::initialize_from_bert(pretrained, *model_);
    }

    std::vector<std::string> diagnostic_texts() const override { return diagnostic_texts_; }

    std::optional<Validation> validate() override {
        EvaluationMode evaluation(*model_);
        Validation result = validation_loss(
            *valid_, valid_start_, config_.validation.max_batches, [&](const data::Seq2SeqBatch& b) { return loss_of(b); },
            [](const data::Seq2SeqBatch& b) { return b.target_tokens; });
        if (!decode_articles_.empty()) result.metrics.push_back({"rouge_l", decode_rouge_l()});
        return result;
    }

private:
    data::Seq2SeqDataOptions data_options(const std::string& articles, const std::string& titles, bool training) const {
        data::Seq2SeqDataOptions o;
        o.article_path = articles;
        o.title_path = titles;
        if (training) o.prepared = options(config_).prepared;
        o.max_source = max_source(config_);
        o.max_target = std::min(options(config_).max_target, config_.model.max_target_positions);
        o.shuffle_buffer = options(config_).shuffle_buffer;
        o.damaged_lines = config_.data.damaged_lines;
        o.shuffle = training;
        o.seed = config_.seed;
        o.batch = {config_.data.batch_sentences, config_.data.batch_tokens, config_.data.pad_multiple};
        o.epochs = training ? 0 : 1;
        return o;
    }

    Var loss_of(const data::Seq2SeqBatch& b) const {
        return model_->loss(b.source_ids, b.source_valid, b.target_input, b.target_output, b.target_valid,
                            options(config_).label_smoothing);
    }

    // Greedy headlines (beam 1, the test section's other decoding settings) for the first validation
    // articles, scored with ROUGE-L F1 (no stemming).
    double decode_rouge_l() const {
        decode::BeamOptions greedy;
        static_cast<decode::DecodingConfig&>(greedy) = options(config_).decoding;
        greedy.beam = 1;
        greedy.max_length = options(config_).max_decode_length;
        const auto headlines = decode::decode_articles(*model_, tokenizer_, decode_articles_, greedy, 32, max_source(config_));
        const eval::RougeScorer scorer(false);
        return scorer.score(best_headlines(headlines), decode_references_).rouge_l.f1;
    }

    const config::ExperimentConfig& config_;
    data::Tokenizer tokenizer_;
    std::unique_ptr<models::Seq2SeqModel> model_;
    std::unique_ptr<data::Seq2SeqBatcher> train_, valid_;
    data::DataPosition valid_start_;
    data::Seq2SeqBatch batch_;
    std::vector<std::string> decode_articles_, decode_references_, diagnostic_texts_;
};

std::vector<DataFile> data_files(const config::ExperimentConfig& config) {
    std::vector<DataFile> files = {{"data.valid_articles", options(config).valid_articles, false},
                                   {"data.valid_titles", options(config).valid_titles, false}};
    // Prepared files were checked when they were prepared; their text may be gone.
    if (options(config).prepared.empty()) {
        files.insert(files.begin(), {{"data.train_articles", options(config).train_articles, true},
                                     {"data.train_titles", options(config).train_titles, true}});
    }
    return files;
}

data::PrepareSummary prepare(const config::ExperimentConfig& config, const data::Tokenizer& tokenizer, const std::string& directory,
                             const data::PrepareOptions& settings, const std::function<void(const data::PrepareProgress&)>& progress) {
    data::PrepareOptions prepare_options = settings;
    prepare_options.damaged_lines = config.data.damaged_lines;
    return data::prepare_pairs(options(config).train_articles, options(config).train_titles, tokenizer, directory, prepare_options,
                               progress);
}

models::BatchShape largest_batch(const config::ExperimentConfig& config) {
    models::BatchShape batch;
    batch.source_length = max_source(config);
    batch.target_length = std::min(options(config).max_target, config.model.max_target_positions);
    batch.rows = rows_allowed(config.data, std::max(batch.source_length, batch.target_length));
    batch.predicted_tokens = batch.rows * batch.target_length;
    return batch;
}

std::unique_ptr<Task> create(const config::ExperimentConfig& config, const data::Tokenizer& tokenizer, Rng& init, Rng& dropout) {
    return std::make_unique<HeadlineTask>(config, tokenizer, init, dropout);
}

// Beam search over the test articles, scored as ROUGE-1.5.5 -m against the references; the per-pair F1s
// are what the paired bootstrap between two runs resamples.
TestResult test(const TrainedCheckpoint& trained) {
    const HeadlineOptions& t = options(trained.config);
    const auto articles = read_lines(t.test_articles, "test.articles");
    const auto references = read_lines(t.test_references, "test.references");
    HNAS_CHECK(articles.size() == references.size(), "test: ", t.test_articles, " has ", articles.size(), " articles but ",
               t.test_references, " has ", references.size(), " references");
    decode::BeamOptions beam;
    static_cast<decode::DecodingConfig&>(beam) = t.decoding;
    decode::check_beam_options(beam);
    const auto loaded = load_model<models::Seq2SeqModel>(trained);
    size_t reported = 0;
    const auto headlines = decode::decode_articles(*loaded.model, trained.tokenizer, articles, beam, t.test_batch,
                                                   max_source(trained.config), [&](size_t done, size_t total) {
                                                       if (done == total || done - reported >= 512) {
                                                           reported = done;
                                                           spdlog::info("test: decoded {}/{} articles", done, total);
                                                       }
                                                   });
    std::vector<std::string> hypotheses = best_headlines(headlines);
    const eval::RougeScorer scorer(true, t.wordnet);
    const eval::RougeReport report = scorer.score(hypotheses, references);
    TestResult result;
    result.metrics = {{"rouge_1", 100 * report.rouge_1.f1}, {"rouge_2", 100 * report.rouge_2.f1}, {"rouge_l", 100 * report.rouge_l.f1}};
    for (size_t i = 0; i < hypotheses.size(); ++i) {
        const eval::PairScores pair = scorer.score_pair(hypotheses[i], references[i]);
        result.per_example["rouge_1"].push_back(100 * pair.rouge_1.f1);
        result.per_example["rouge_2"].push_back(100 * pair.rouge_2.f1);
        result.per_example["rouge_l"].push_back(100 * pair.rouge_l.f1);
    }
    result.settings = {{"articles", t.test_articles},
                       {"references", t.test_references},
                       {"decoding", decoding_json(beam)},
                       {"rouge", "ROUGE-1.5.5 -n 2 -a -f A -p 0.5 -m, F1 in %"}};
    result.outputs = std::move(hypotheses);
    return result;
}

// An article as the encoder reads it: its pieces, cut to the longest source.
std::vector<int32_t> article_ids(const config::ExperimentConfig& config, const data::Tokenizer& tokenizer, const std::string& text) {
    std::vector<int32_t> ids = tokenizer.encode(text);
    ids.resize(std::min(ids.size(), static_cast<size_t>(max_source(config))));
    return ids;
}

}  // namespace

const TaskDefinition& definition() {
    static const TaskDefinition headline{
        .schema = &schema(),
        .data_files = data_files,
        .largest_batch = largest_batch,
        .memory_model_keys = ", model.decoder_layers",
        .memory_data_keys = "data.max_source, data.max_target",
        .target_unit = "target tokens",
        .complete_config = nullptr,
        .create = create,
        .evaluate = evaluate,
        .predict = nullptr,
        .predictions_suffix = nullptr,
        .outputs_command = "hnas decode",
        .test = test,
        .fixed_tokenizer = nullptr,
        .encoder_ids = article_ids,
        .prepare = prepare,
    };
    return headline;
}

}  // namespace hnas::tasks::headline
