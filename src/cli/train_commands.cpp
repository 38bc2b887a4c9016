// `hnas demo`, `hnas train`, `hnas vocab` and `hnas weights`.
#include <spdlog/spdlog.h>

#include <csignal>
#include <filesystem>
#include <memory>

#include "analysis/training_observers.h"
#include "backend/matmul.h"
#include "base/number_format.h"
#include "cli/commands.h"
#include "command_line/validators.h"
#include "config/experiment_config.h"
#include "tasks/task.h"
#include "data/tokenizer.h"
#include "distributed/communicator.h"
#include "train/block_demo.h"
#include "train/trainer.h"
#include "train/weights_only.h"

namespace hnas::cli {

void add_demo_command(CLI::App& app) {
    auto* command = app.add_subcommand("demo", "Train one Transformer block to reverse a fixed batch (a smoke test)");
    auto options = std::make_shared<train::BlockDemoOptions>();
    command->add_option("--steps", options->steps, "Adam steps")->check(command_line::positive_integer<int>());
    command->add_option("--seed", options->seed, "Seed for data, initialization and dropout")
        ->check(command_line::non_negative_integer<uint64_t>());
    command->add_option("--lr", options->learning_rate, "Learning rate")->check(command_line::positive_number<float>());
    command->callback([options] {
        spdlog::info("hnas {} on {}", HNAS_VERSION, backend::describe());
        const auto losses = train::run_block_demo(*options, [&](int step, float loss) {
            if (step % 20 == 0 || step + 1 == options->steps) spdlog::info("step {:4d}  loss {:.4f}", step, portable(loss));
        });
        spdlog::info("loss {:.4f} -> {:.4f} ({:.1f} % lower) in {} steps", portable(losses.front()), portable(losses.back()),
                     portable(100.0 * (1.0 - losses.back() / losses.front())), losses.size());
    });
}

// The exit status of a run that a signal stopped after its checkpoint: 128 + the signal's number, as a
// shell reports a process the signal killed (130 for SIGINT, 143 for SIGTERM). A rank of a data-parallel
// run that stopped because another rank received the signal reports SIGTERM, which mpirun forwards to
// every rank.
int exit_status_after_signal(int signal) { return 128 + (signal != 0 ? signal : SIGTERM); }

// `hnas train`: the main job (see src/train/trainer.h for what a run directory holds).
void add_train_command(CLI::App& app, int& exit_code) {
    struct Options {
        std::string config;
        std::vector<std::string> overrides;
        train::TrainOptions train;
    };
    auto options = std::make_shared<Options>();
    auto* command = app.add_subcommand("train", "Train a model from a config (its task: configs/README.md)");
    command->add_option("--config", options->config, "Experiment config (JSON; see configs/README.md)")
        ->required()
        ->check(CLI::ExistingFile);
    command->add_option("--out", options->train.run_dir, "Run directory (default: runs/<config name>)");
    command->add_flag("--resume", options->train.resume, "Continue from the newest checkpoint in the run directory");
    command->add_option("--set", options->overrides, "Override a config value: key.path=value (repeatable)");
    command->add_flag("--reset-optimizer", options->train.reset_optimizer, "With --resume: start with fresh Adam moments");
    command->add_flag("--reset-schedule", options->train.reset_schedule, "With --resume: restart the learning-rate schedule");
    command->add_option("--stop-after", options->train.stop_after_steps,
                        "Write a checkpoint and stop after this many steps of this invocation (time-sliced jobs)")
        ->check(command_line::positive_integer<int64_t>());
    command->callback([options, &exit_code] {
        const auto config = tasks::load_config(options->config, options->overrides);
        if (options->train.run_dir.empty()) {
            options->train.run_dir = "runs/" + std::filesystem::path(options->config).stem().string();
        }
        // Under mpirun: the MPI world (initialized here, after main's re-execution); else this process.
        const auto world = distributed::connect(config.train.collective_timeout);
        if (world->size() > 1) {
            spdlog::set_pattern(fmt::format("[%Y-%m-%d %H:%M:%S.%e] [%^%l%$] [rank {}] %v", world->rank()));
            if (world->rank() != 0) spdlog::set_level(spdlog::level::warn);  // rank 0 reports for all
        }
        options->train.communicator = world.get();
        // The papers' diagnostics in metrics.jsonl (hybrid weights, explaining away)
        const auto observers = analysis::training_observers();
        options->train.observers = analysis::observer_pointers(observers);
        train::TrainResult result;
        try {
            result = train::train(config, options->train);
        } catch (const std::exception& e) {
            // The other ranks would wait for this one until their timeout: end the job now.
            if (world->size() > 1) world->abort(e.what());
            throw;
        }
        spdlog::info("stopped at step {} ({}); last training loss {:.4f}{}", result.steps, name_of(result.stopped_because),
                     portable(result.last_loss),
                     result.best_metric ? fmt::format("; best validation {} {:.4f}", config.validation.metric,
                                                      portable(*result.best_metric))
                                        : std::string());
        if (result.stopped_because == train::StopReason::signal) exit_code = exit_status_after_signal(result.signal);
    });
}

// `hnas vocab`: trains a SentencePiece model with hnas's special ids.
void add_vocab_command(CLI::App& app) {
    auto options = std::make_shared<data::TokenizerTrainOptions>();
    auto* command = app.add_subcommand("vocab", "Train a SentencePiece tokenizer (pad 0, unk 1, bos 2, eos 3, [CLS] [SEP] [MASK])");
    command->add_option("--input", options->inputs, "Text files, one sentence per line")->required()->check(CLI::ExistingFile);
    command->add_option("--model-prefix", options->model_prefix, "Writes PREFIX.model and PREFIX.vocab")->required();
    command->add_option("--vocab-size", options->vocab_size, "Pieces, special ones included")
        ->check(command_line::integer_in<int>(16, 1000000));
    command->add_option("--type", options->type, "unigram or bpe")->transform(command_line::enum_choices<data::TokenizerType>());
    command->add_option("--input-sentence-size", options->input_sentence_size, "Lines sampled for training (0: all)")
        ->check(command_line::non_negative_integer<int64_t>());
    command->add_option("--seed", options->seed, "Seed of the line sampling")->check(command_line::non_negative_integer<uint64_t>());
    command->callback([options] {
        data::train_tokenizer(*options);
        const auto tokenizer = data::Tokenizer::load(options->model_prefix + ".model");
        spdlog::info("wrote {}.model ({} pieces)", options->model_prefix, tokenizer.vocab_size());
    });
}

// `hnas weights`: a checkpoint without its optimizer moments, to share a trained model (data/pretrained/).
void add_weights_command(CLI::App& app) {
    struct Options {
        std::string checkpoint, out;
    };
    auto options = std::make_shared<Options>();
    auto* command = app.add_subcommand(
        "weights", "Write a checkpoint without its optimizer moments (parameters, tokenizer, config): for init_from, test, eval, export");
    command->add_option("--checkpoint", options->checkpoint, "A checkpoint of hnas train")->required()->check(CLI::ExistingFile);
    command->add_option("--out", options->out, "The checkpoint to write")->required();
    command->callback([options] {
        const train::WeightsOnlyReport report = train::write_weights_only(options->checkpoint, options->out);
        spdlog::info("weights: wrote {} ({} entries, {} optimizer moments left out, {:.1f} MB)", options->out, report.entries_kept,
                     report.moments_dropped, portable(static_cast<double>(report.bytes_written) / 1e6));
    });
}

}  // namespace hnas::cli
