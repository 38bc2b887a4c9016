// hnas-bench data and batches: the Gigaword pipeline's speed, and a run's batches for the PyTorch twin.
#include <fmt/format.h>

#include <filesystem>
#include <iostream>
#include <nlohmann/json.hpp>

#include "base/json.h"
#include "base/number_format.h"
#include "base/read_file.h"
#include "bench/bench.h"
#include "data/gigaword.h"
#include "io/checkpoint.h"
#include "models/model_io.h"
#include "tasks/headline/headline_options.h"
#include "tasks/mlm/mlm_options.h"
#include "tasks/task.h"
#include "tasks/task_support.h"

namespace hnas::bench {

// The data pipeline on its own (one thread, no prefetch): files -> tokenizer -> shuffled, bucketed,
// padded batches, for three epochs; epoch 0 includes the checking pass and fills the word cache.
void bench_data(const std::string& articles, const std::string& titles) {
    const std::filesystem::path scratch = std::filesystem::temp_directory_path() / "hnas_bench_data";
    std::filesystem::create_directories(scratch);
    data::TokenizerTrainOptions vocab;
    vocab.inputs = {articles, titles};
    vocab.model_prefix = (scratch / "giga8k").string();
    vocab.vocab_size = 8000;
    vocab.input_sentence_size = 20000;
    data::train_tokenizer(vocab);
    data::Seq2SeqDataOptions options;
    options.article_path = articles;
    options.title_path = titles;
    options.batch.max_sentences = 64;
    options.epochs = 3;
    options.prefetch = 0;
    auto start = Clock::now();
    data::Seq2SeqBatcher batcher(data::Tokenizer::load(vocab.model_prefix + ".model"), options);
    std::vector<int64_t> rows(3, 0), tokens(3, 0);
    std::vector<double> seconds(3, 0.0);
    while (true) {
        const auto epoch = static_cast<size_t>(batcher.position().epoch);
        const auto batch = batcher.next();
        if (!batch) break;
        rows[epoch] += batch->source_ids.dim(0);
        tokens[epoch] += batch->source_tokens + batch->target_tokens;
        if (static_cast<size_t>(batcher.position().epoch) != epoch) {
            const auto now = Clock::now();
            seconds[epoch] = std::chrono::duration<double>(now - start).count();
            start = now;
        }
    }
    fmt::print("Gigaword pipeline alone, one thread ({}, unigram 8k)\n{:<6} {:>10} {:>14} {:>8} {:>16}\n", articles, "epoch",
               "pairs", "input tokens", "seconds", "input tokens/s");
    for (size_t epoch = 0; epoch < 3; ++epoch) {
        fmt::print("{:<6} {:>10} {:>14} {:>8.3f} {:>16.0f}\n", epoch, rows[epoch], tokens[epoch], portable(seconds[epoch]),
                   portable(static_cast<double>(tokens[epoch]) / seconds[epoch]));
    }
    std::filesystem::remove_all(scratch);
}

// The first `steps` training batches a run of `hnas train` drew (its config.json and tokenizer.model:
// the same seed draws the same batches), with the initial parameters of a model built from that
// config and its dropout-off loss on the first batch, in one checkpoint-format file:
// "batch/<step>/<field>" per batch, the parameters by their names, and in the metadata the run's
// resolved config. The parameters are drawn from the init stream of the config's seed, not the run's
// own; the twin trains from them, and the step-0 loss shows both frameworks build the same model.
void bench_batches(const std::string& run_dir, int steps, const std::string& out) {
    namespace fs = std::filesystem;
    const fs::path run(run_dir);
    const fs::path tokenizer_path = run / "tokenizer.model";
    HNAS_CHECK(fs::exists(tokenizer_path), "batches: ", tokenizer_path.string(),
               " is missing (a run that trained its own SentencePiece tokenizer has it)");
    config::ExperimentConfig config = tasks::load_config((run / "config.json").string());
    HNAS_CHECK(config.task == &tasks::headline::schema() || config.task == &tasks::mlm::schema(), "batches: ", run_dir,
               " is a run of task ", config.task->name, "; only headline and mlm runs can be replayed");
    const data::Tokenizer tokenizer = data::Tokenizer::load(tokenizer_path.string());
    if (config.model.vocab_size == 0) config.model.vocab_size = tokenizer.vocab_size();
    Rng init_rng(config.seed, 0), dropout_rng(config.seed, 1);
    const auto task = tasks::task_definition(*config.task).create(config, tokenizer, init_rng, dropout_rng);
    nlohmann::ordered_json meta = {{"hnas_version", HNAS_VERSION}, {"run", run_dir}, {"steps", steps}};
    const std::string config_path = (run / "config.json").string();
    meta["config"] = parse_json(read_file(config_path, "the run's config"), "the run's config " + config_path + ":");
    std::vector<std::pair<std::string, Tensor>> batches;
    for (int step = 0; step < steps; ++step) {
        const tasks::BatchTokens tokens = task->next_batch(0, 1);
        if (step == 0) {
            NoGradScope no_grad;
            const tasks::EvaluationMode evaluation(task->model());
            meta["loss0_eval"] = task->batch_loss(tokens).item();
        }
        for (auto& [name, tensor] : task->batch_tensors()) batches.emplace_back(fmt::format("batch/{}/{}", step, name), tensor);
    }
    io::CheckpointWriter writer(meta);
    models::add_parameters(writer, task->model());
    for (const auto& [name, tensor] : batches) writer.add_tensor(name, tensor);
    writer.write(out);
    std::cout << nlohmann::json{{"batches", steps}, {"out", out}, {"loss0_eval", meta["loss0_eval"]}}.dump() << std::endl;
}

}  // namespace hnas::bench
