#include "tasks/synthetic/synthetic_task.h"

#include "base/hash.h"
#include "models/symbol_encoder.h"
#include "tasks/synthetic/synthetic_options.h"
#include "tasks/task_support.h"

namespace hnas::tasks::synthetic {

namespace {

// The validation and test streams' seeds: fixed, so every run sees the same examples.
constexpr uint64_t kValidationSeed = 0x7661'6c69'6400'0002ULL, kTestSeed = 0x7465'7374'0000'0003ULL;

data::SyntheticOptions stream(const config::ExperimentConfig& config, int64_t length, uint64_t seed) {
    data::SyntheticOptions o;
    o.problem = options(config).problem;
    o.symbols = static_cast<int32_t>(options(config).symbols);
    o.length = length;
    o.batch = config.data.batch_sentences;
    o.seed = seed;
    return o;
}

// A batch's rows [first, last) as the model's inputs: ids (rows, N) of data::Tokenizer::symbols and labels (rows).
struct Examples {
    Tensor ids, labels;
    std::vector<data::DistinctionCase> rules;  // case distinction only
};
Examples examples_of(const data::SyntheticBatch& batch, int64_t first, int64_t last) {
    const int64_t rows = last - first;
    std::vector<int32_t> ids(static_cast<size_t>(rows * batch.length));
    for (size_t e = 0; e < ids.size(); ++e) {
        ids[e] = data::kNumSpecialIds + batch.symbols[static_cast<size_t>(first * batch.length) + e];
    }
    Examples examples{Tensor::from_ints({rows, batch.length}, ids),
                      Tensor::from_ints({rows}, std::vector<int32_t>(batch.labels.begin() + first, batch.labels.begin() + last)),
                      {}};
    if (!batch.rules.empty()) examples.rules.assign(batch.rules.begin() + first, batch.rules.begin() + last);
    return examples;
}
Examples examples_of(const data::SyntheticBatch& batch) { return examples_of(batch, 0, batch.rows); }

// Tallies a batch's right answers, with the rule of case distinction of each as the part.
void tally_batch(Tally& tally, const Tensor& logits, const Examples& examples) {
    const std::vector<int32_t> predicted = argmax_rows(logits);
    for (size_t row = 0; row < predicted.size(); ++row) {
        const bool hit = predicted[row] == examples.labels.ints()[row];
        tally.add(hit);
        if (!examples.rules.empty()) tally.add_part(static_cast<size_t>(examples.rules[row]), hit);
    }
}

// "accuracy_argmin" etc.; a rule that never occurred is left out.
void add_rule_metrics(const Tally& tally, std::vector<Metric>& metrics) {
    for (const auto& [rule, name] : data::kDistinctionCaseNames) {
        const auto r = static_cast<size_t>(rule);
        if (tally.part_count(r) == 0) continue;
        metrics.push_back({"accuracy_" + std::string(name), tally.part_accuracy(r)});
    }
}

// Everything that draws the training batches.
uint64_t fingerprint(const data::SyntheticOptions& o) {
    uint64_t hash = mix64(static_cast<uint64_t>(o.problem));
    for (const uint64_t value : {static_cast<uint64_t>(o.symbols), static_cast<uint64_t>(o.length), static_cast<uint64_t>(o.batch), o.seed}) {
        hash = hash_combine(hash, value);
    }
    return hash;
}

class SyntheticTask : public Task {
public:
    SyntheticTask(const config::ExperimentConfig& config, const data::Tokenizer& tokenizer, Rng& init, Rng& dropout)
        : config_(config),
          train_(stream(config, options(config).length, config.seed)),
          batches_("synthetic", train_.batch, fingerprint(train_)) {
        HNAS_CHECK(tokenizer.vocab_size() == data::kNumSpecialIds + options(config).symbols, "synthetic task: the tokenizer has ",
                   tokenizer.vocab_size(), " ids, not the ", data::kNumSpecialIds + options(config).symbols, " of ",
                   options(config).symbols, " symbols");
        model_ = std::make_unique<models::SymbolEncoder>(config.model, init, dropout);
        for (int64_t k = 0; k < options(config).valid_batches; ++k) {
            valid_.push_back(data::synthetic_batch(stream(config, options(config).valid_length, kValidationSeed), static_cast<uint64_t>(k)));
            valid_at_train_length_.push_back(
                data::synthetic_batch(stream(config, options(config).length, kValidationSeed + 1), static_cast<uint64_t>(k)));
        }
    }

    models::Model& model() override { return *model_; }

    // The first validation batch's sequences as text, which the symbol tokenizer encodes back to its ids.
    std::vector<std::string> diagnostic_texts() const override {
        std::vector<std::string> texts;
        const data::SyntheticBatch& batch = valid_.front();
        for (int64_t row = 0; row < batch.rows && texts.size() < kDiagnosticTexts; ++row) {
            std::string text;
            for (int64_t t = 0; t < batch.length; ++t) {
                if (t > 0) text.push_back(' ');
                text.append(std::to_string(batch.symbols[static_cast<size_t>(row * batch.length + t)]));
            }
            texts.push_back(std::move(text));
        }
        return texts;
    }

    BatchTokens next_batch(int rank, int ranks) override {
        const data::SyntheticBatch batch = data::synthetic_batch(train_, batches_.take());
        const auto [first, last] = data::shard_rows(batch.rows, rank, ranks);
        shard_ = examples_of(batch, first, last);
        return {batch.rows, last - first, batch.rows * batch.length};
    }

    Var batch_loss(const BatchTokens& tokens) override {
        if (tokens.shard == 0) return Var(Tensor::scalar(0.0f));
        return shard_part(ops::cross_entropy(model_->logits(shard_.ids), shard_.labels), tokens.shard, tokens.global);
    }

    data::DataPosition position() const override { return batches_.position(); }
    void restore(const data::DataPosition& p) override { batches_.restore(p); }

    std::optional<Validation> validate() override {
        EvaluationMode evaluation(*model_);
        Validation result;
        double weighted_loss = 0.0;
        Tally tally;
        for (const data::SyntheticBatch& batch : valid_) {
            const Examples examples = examples_of(batch);
            const Var logits = model_->logits(examples.ids);
            weighted_loss += static_cast<double>(ops::cross_entropy(logits, examples.labels).item()) * static_cast<double>(batch.rows);
            tally_batch(tally, logits.value(), examples);
        }
        result.tokens = tally.total;
        result.loss = weighted_loss / static_cast<double>(tally.total);
        result.metrics = {{"loss", result.loss}, {"accuracy", tally.accuracy()}};
        result.metrics.push_back({"accuracy_at_train_length", accuracy_of(valid_at_train_length_).accuracy()});
        add_rule_metrics(tally, result.metrics);
        return result;
    }

    // `hnas test`: `batches` batches of the test stream at valid_length; the tally and the mean loss.
    std::pair<Tally, double> test(int64_t batches) {
        EvaluationMode evaluation(*model_);
        Tally tally;
        double weighted_loss = 0.0;
        for (int64_t k = 0; k < batches; ++k) {
            const data::SyntheticBatch batch =
                data::synthetic_batch(stream(config_, options(config_).valid_length, kTestSeed), static_cast<uint64_t>(k));
            const Examples examples = examples_of(batch);
            const Var logits = model_->logits(examples.ids);
            weighted_loss += static_cast<double>(ops::cross_entropy(logits, examples.labels).item()) * static_cast<double>(batch.rows);
            tally_batch(tally, logits.value(), examples);
        }
        return {tally, weighted_loss / static_cast<double>(tally.total)};
    }

private:
    Tally accuracy_of(const std::vector<data::SyntheticBatch>& batches) const {
        Tally tally;
        for (const data::SyntheticBatch& batch : batches) {
            const Examples examples = examples_of(batch);
            tally_batch(tally, model_->logits(examples.ids).value(), examples);
        }
        return tally;
    }

    const config::ExperimentConfig& config_;
    data::SyntheticOptions train_;
    GeneratedBatches batches_;
    std::unique_ptr<models::SymbolEncoder> model_;
    std::vector<data::SyntheticBatch> valid_, valid_at_train_length_;
    Examples shard_;
};

std::vector<DataFile> data_files(const config::ExperimentConfig&) { return {}; }

models::BatchShape largest_batch(const config::ExperimentConfig& config) {
    models::BatchShape batch;
    batch.rows = config.data.batch_sentences;
    batch.source_length = std::max(options(config).length, options(config).valid_length);
    return batch;
}

std::unique_ptr<Task> create(const config::ExperimentConfig& config, const data::Tokenizer& tokenizer, Rng& init, Rng& dropout) {
    return std::make_unique<SyntheticTask>(config, tokenizer, init, dropout);
}

TestResult test(const TrainedCheckpoint& trained) {
    const config::ExperimentConfig& config = trained.config;
    Rng init_rng(config.seed, 0), dropout_rng(0, 1);  // every parameter is then overwritten from the checkpoint
    SyntheticTask task(config, trained.tokenizer, init_rng, dropout_rng);
    models::load_parameters(trained.checkpoint, task.model());
    const auto [tally, loss] = task.test(options(config).test_batches);
    TestResult result;
    std::vector<Metric> metrics{{"accuracy", tally.accuracy()}, {"loss", loss}};
    add_rule_metrics(tally, metrics);
    for (const Metric& metric : metrics) result.metrics[metric.name] = metric.value;
    result.per_example["accuracy"] = tally.correct;
    result.settings = {{"problem", name_of(options(config).problem)}, {"length", options(config).valid_length},
                       {"examples", tally.total}, {"stream", "test"}};
    return result;
}

data::Tokenizer symbol_tokenizer(const config::ExperimentConfig& config) {
    return data::Tokenizer::symbols(static_cast<int32_t>(options(config).symbols));
}

// A text of symbols as the encoder reads it: its ids, no special tokens.
std::vector<int32_t> symbol_ids(const config::ExperimentConfig& /*config*/, const data::Tokenizer& tokenizer, const std::string& text) {
    return tokenizer.encode(text);
}

}  // namespace

const TaskDefinition& definition() {
    static const TaskDefinition synthetic{
        .schema = &schema(),
        .data_files = data_files,
        .largest_batch = largest_batch,
        .memory_model_keys = "",
        .memory_data_keys = "data.length, data.valid_length",
        .target_unit = "examples",
        .complete_config = nullptr,
        .create = create,
        .evaluate = nullptr,
        .predict = nullptr,
        .predictions_suffix = nullptr,
        .outputs_command = nullptr,
        .test = test,
        .fixed_tokenizer = symbol_tokenizer,
        .encoder_ids = symbol_ids,
        .prepare = nullptr,
    };
    return synthetic;
}

}  // namespace hnas::tasks::synthetic
