// `hnas prepare`: a config's training data tokenized once into memory-mapped shards (docs/data.md).
#include <spdlog/spdlog.h>

#include <chrono>
#include <thread>

#include "base/check.h"
#include "cli/commands.h"
#include "command_line/validators.h"
#include "tasks/task.h"
#include "train/vocabulary.h"

namespace hnas::cli {

namespace {

struct PrepareCommand {
    std::string config, output;
    std::vector<std::string> overrides;
    data::PrepareOptions prepare{.threads = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()))};
    int64_t chunk_mb = static_cast<int64_t>(data::PrepareOptions{}.chunk_bytes >> 20);
};

// "3.2 of 10.0 GB (32 %), 41 MB/s, about 2 min 51 s left"
std::string progress_line(const data::PrepareProgress& p, double seconds) {
    const double gb = 1e-9, done = static_cast<double>(p.bytes_done), total = static_cast<double>(p.bytes_total);
    const double rate = seconds > 0 ? done / seconds : 0.0;
    const auto left = static_cast<int64_t>(rate > 0 ? (total - done) / rate : 0.0);
    return fmt::format("prepare: shard {} of {}, {:.2f} of {:.2f} GB ({:.0f} %), {:.1f} MB/s, about {} min {} s left", p.shards_done,
                       p.shards_total, done * gb, total * gb, total > 0 ? 100.0 * done / total : 100.0, rate * 1e-6, left / 60,
                       left % 60);
}

void run_prepare(const PrepareCommand& o) {
    const config::ExperimentConfig config = tasks::load_config(o.config, o.overrides);
    const tasks::TaskDefinition& task = tasks::task_definition(*config.task);
    HNAS_CHECK(task.prepare != nullptr, "prepare: the ", config.task->name, " task reads its data as it is; nothing to prepare");
    HNAS_CHECK(!config.tokenizer.model.empty(), "prepare: ", o.config, " sets no tokenizer.model, so its runs train a tokenizer "
               "from the data; prepared data needs the tokenizer first (make one with `hnas vocab` and set tokenizer.model)");
    const data::Tokenizer tokenizer = train::load_tokenizer(config.tokenizer);
    data::PrepareOptions prepare = o.prepare;
    prepare.chunk_bytes = static_cast<uint64_t>(o.chunk_mb) << 20;
    const auto start = std::chrono::steady_clock::now();
    auto last = start - std::chrono::seconds(10);
    const auto seconds = [&start] { return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count(); };
    spdlog::info("prepare: {} with {} threads into {}", o.config, prepare.threads, o.output);
    const data::PrepareSummary summary = task.prepare(config, tokenizer, o.output, prepare, [&](const data::PrepareProgress& p) {
        const auto now = std::chrono::steady_clock::now();
        if (now - last < std::chrono::seconds(2) && p.shards_done < p.shards_total) return;
        last = now;
        spdlog::info("{}", progress_line(p, seconds()));
    });
    const double taken = seconds();
    spdlog::info("prepare: {} shards ({} reused) in {}: {} tokens ({}-byte ids), {} sentences, {} documents from {:.3f} GB of text"
                 "{}; {:.1f} s, {:.1f} MB/s",
                 summary.shards, summary.reused_shards, o.output, summary.tokens, summary.id_bytes, summary.sentences,
                 summary.documents, 1e-9 * static_cast<double>(summary.bytes),
                 summary.damaged_lines > 0 ? fmt::format(" ({} damaged lines left out)", summary.damaged_lines) : "", taken,
                 taken > 0 ? 1e-6 * static_cast<double>(summary.bytes) / taken : 0.0);
    spdlog::info("prepare: train on it with --set data.prepared={}", o.output);
}

}  // namespace

void add_prepare_command(CLI::App& app) {
    auto options = std::make_shared<PrepareCommand>();
    auto* command = app.add_subcommand(
        "prepare", "Tokenize a config's training data once into memory-mapped shards for data.prepared (docs/data.md); "
                   "rerun to resume");
    command->add_option("--config", options->config, "Experiment config (JSON): its training sources and tokenizer.model")
        ->required()
        ->check(CLI::ExistingFile);
    command->add_option("--set", options->overrides, "Override a config value: key.path=value (repeatable)");
    command->add_option("--output", options->output, "The prepared directory")->required();
    command->add_option("--threads", options->prepare.threads, "Chunks tokenized at once (default: all cores)")
        ->check(command_line::integer_in<int>(1, 1024));
    command->add_option("--chunk-mb", options->chunk_mb, "Megabytes of text per shard")->check(command_line::integer_in<int64_t>(1, 1024));
    command->callback([options] { run_prepare(*options); });
}

}  // namespace hnas::cli
