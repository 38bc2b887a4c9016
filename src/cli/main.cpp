// The hnas command line: one executable, one subcommand per job. Each subcommand parses its flags
// here and calls into the library; errors reach the user as one line naming what was wrong.
#include <spdlog/spdlog.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <cmath>
#include <cstdlib>
#include <cstdio>
#include <filesystem>
#include <iostream>
#include <nlohmann/json.hpp>

#include "backend/matmul.h"
#include "config/experiment_config.h"
#include "eval/rouge.h"
#include "io/checkpoint.h"
#include "models/model_factory.h"
#include "data/tokenizer.h"
#include "train/block_demo.h"
#include "train/trainer.h"

namespace {

void add_demo_command(CLI::App& app) {
    auto* command = app.add_subcommand("demo", "Train one Transformer block to reverse a fixed batch (a smoke test)");
    auto options = std::make_shared<hnas::train::BlockDemoOptions>();
    command->add_option("--steps", options->steps, "Adam steps")->check(CLI::PositiveNumber);
    command->add_option("--seed", options->seed, "Seed for data, initialization and dropout");
    command->add_option("--lr", options->learning_rate, "Learning rate")->check(CLI::PositiveNumber);
    command->callback([options] {
        spdlog::info("hnas {} on {}", HNAS_VERSION, hnas::backend::describe());
        const auto losses = hnas::train::run_block_demo(*options, [&](int step, float loss) {
            if (step % 20 == 0 || step + 1 == options->steps) spdlog::info("step {:4d}  loss {:.4f}", step, loss);
        });
        spdlog::info("loss {:.4f} -> {:.4f} ({:.1f} % lower) in {} steps", losses.front(), losses.back(),
                     100.0 * (1.0 - losses.back() / losses.front()), losses.size());
    });
}

void add_rouge_command(CLI::App& app) {
    struct Options {
        std::string hypotheses, references, wordnet = std::string(HNAS_SOURCE_DIR) + "/data/wordnet";
        bool stem = false, json = false;
        int bootstrap = 0;
        uint64_t seed = 1;
    };
    auto options = std::make_shared<Options>();
    auto* command = app.add_subcommand("rouge", "ROUGE-1/2/L of line-aligned files, as ROUGE-1.5.5 -n 2 -a -f A -p 0.5");
    command->add_option("--hyp", options->hypotheses, "Hypotheses, one per line")->required()->check(CLI::ExistingFile);
    command->add_option("--ref", options->references, "References, one per line")->required()->check(CLI::ExistingFile);
    command->add_flag("--stem", options->stem, "Stem as ROUGE-1.5.5 -m (WordNet exceptions, then Porter)");
    command->add_option("--wordnet", options->wordnet, "Folder with the WordNet 2.0 exception lists");
    command->add_option("--bootstrap", options->bootstrap, "Resamples for 95 % confidence intervals (0: none)")
        ->check(CLI::NonNegativeNumber);
    command->add_option("--seed", options->seed, "Seed of the bootstrap resampling");
    command->add_flag("--json", options->json, "Print JSON (values in 0-1) instead of the table");
    command->callback([options] {
        const hnas::eval::RougeScorer scorer(options->stem, options->stem ? options->wordnet : "");
        const auto report = scorer.score(hnas::eval::read_lines(options->hypotheses),
                                         hnas::eval::read_lines(options->references), options->bootstrap, options->seed);
        const std::pair<const char*, const hnas::eval::RougeScore*> rows[] = {
            {"rouge-1", &report.rouge_1}, {"rouge-2", &report.rouge_2}, {"rouge-l", &report.rouge_l}};
        const hnas::eval::RougeIntervals* intervals[] = {&report.rouge_1_ci, &report.rouge_2_ci, &report.rouge_l_ci};
        if (options->json) {
            nlohmann::ordered_json out;
            for (size_t i = 0; i < 3; ++i) {
                auto& entry = out[rows[i].first];
                entry = {{"precision", rows[i].second->precision},
                         {"recall", rows[i].second->recall},
                         {"f1", rows[i].second->f1}};
                if (report.bootstrap_samples > 0) entry["f1_ci95"] = {intervals[i]->f1.low, intervals[i]->f1.high};
            }
            out["pairs"] = report.pairs;
            std::cout << out.dump(2) << "\n";
            return;
        }
        std::printf("ROUGE over %zu pairs%s (values in %%, 0-100)\n", report.pairs, options->stem ? ", stemmed" : "");
        std::printf("%-8s %9s %9s %9s%s\n", "", "precision", "recall", "F1", report.bootstrap_samples ? "   F1 95% CI" : "");
        for (size_t i = 0; i < 3; ++i) {
            std::printf("%-8s %9.2f %9.2f %9.2f", rows[i].first, 100 * rows[i].second->precision,
                        100 * rows[i].second->recall, 100 * rows[i].second->f1);
            if (report.bootstrap_samples) std::printf("   [%.2f, %.2f]", 100 * intervals[i]->f1.low, 100 * intervals[i]->f1.high);
            std::printf("\n");
        }
    });
}

void print_parameter_groups(const std::vector<std::pair<std::string, int64_t>>& parameters) {
    int64_t total = 0;
    for (const auto& [name, count] : parameters) total += count;
    std::printf("parameters: %lld (%.2f M)\n", static_cast<long long>(total), static_cast<double>(total) / 1e6);
    for (const auto& [group, count] : hnas::models::group_parameter_counts(parameters)) {
        std::printf("  %-40s %12lld\n", group.c_str(), static_cast<long long>(count));
    }
}

// `hnas train`: the main job (see src/train/trainer.h for what a run directory holds).
void add_train_command(CLI::App& app, int& exit_code) {
    struct Options {
        std::string config;
        std::vector<std::string> overrides;
        hnas::train::TrainOptions train;
    };
    auto options = std::make_shared<Options>();
    auto* command = app.add_subcommand("train", "Train a model from a config (headline generation or masked LM)");
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
        ->check(CLI::PositiveNumber);
    command->callback([options, &exit_code] {
        const auto config = hnas::config::load_experiment_config(options->config, options->overrides);
        if (options->train.run_dir.empty()) {
            options->train.run_dir = "runs/" + std::filesystem::path(options->config).stem().string();
        }
        const auto result = hnas::train::train(config, options->train);
        spdlog::info("stopped at step {} ({}); last training loss {:.4f}{}", result.steps, result.stopped_because,
                     result.last_loss, result.best_metric ? fmt::format("; best validation {} {:.4f}", config.validation.metric,
                                                                        *result.best_metric)
                                                          : std::string());
        if (result.stopped_because == "signal") exit_code = 130;
    });
}

// `hnas vocab`: trains a SentencePiece model with hnas's special ids.
void add_vocab_command(CLI::App& app) {
    auto options = std::make_shared<hnas::data::TokenizerTrainOptions>();
    auto* command = app.add_subcommand("vocab", "Train a SentencePiece tokenizer (pad 0, unk 1, bos 2, eos 3, [CLS] [SEP] [MASK])");
    command->add_option("--input", options->inputs, "Text files, one sentence per line")->required()->check(CLI::ExistingFile);
    command->add_option("--model-prefix", options->model_prefix, "Writes PREFIX.model and PREFIX.vocab")->required();
    command->add_option("--vocab-size", options->vocab_size, "Pieces, special ones included")->check(CLI::Range(16, 1000000));
    command->add_option("--type", options->type, "unigram or bpe")->check(CLI::IsMember({"unigram", "bpe"}));
    command->add_option("--input-sentence-size", options->input_sentence_size, "Lines sampled for training (0: all)");
    command->add_option("--seed", options->seed, "Seed of the line sampling");
    command->callback([options] {
        hnas::data::train_tokenizer(*options);
        const auto tokenizer = hnas::data::Tokenizer::load(options->model_prefix + ".model");
        spdlog::info("wrote {}.model ({} pieces)", options->model_prefix, tokenizer.vocab_size());
    });
}

// `hnas inspect`: a checkpoint's header, parameter counts and hybrid weights; or, for a .json config,
// the resolved config and the parameter counts of the model it builds.
void add_inspect_command(CLI::App& app) {
    struct Options {
        std::string path;
        std::vector<std::string> overrides;
        int64_t vocab_size = 0;
    };
    auto options = std::make_shared<Options>();
    auto* command = app.add_subcommand("inspect", "Show a checkpoint (header, parameter counts, hybrid u) or a config");
    command->add_option("path", options->path, "A checkpoint file, or a config (.json)")->required()->check(CLI::ExistingFile);
    command->add_option("--set", options->overrides, "Config override key.path=value (configs only)");
    command->add_option("--vocab-size", options->vocab_size, "Vocabulary for configs that take it from the tokenizer");
    command->callback([options] {
        if (options->path.size() > 5 && options->path.substr(options->path.size() - 5) == ".json") {
            hnas::config::ExperimentConfig config = hnas::config::load_experiment_config(options->path, options->overrides);
            if (config.model.vocab_size == 0) config.model.vocab_size = options->vocab_size;
            std::cout << config.resolved.dump(2) << "\n";
            hnas::Rng init(config.seed, 0), dropout(config.seed, 1);
            const auto model = hnas::models::build_model(config.model, init, dropout);
            std::vector<std::pair<std::string, int64_t>> counts;
            for (const auto& named : model->named_parameters()) counts.emplace_back(named.name, named.parameter.numel());
            print_parameter_groups(counts);
            return;
        }
        const auto header = hnas::io::read_checkpoint_header(options->path);
        std::cout << "format version " << header.at("format_version") << "\nmetadata:\n"
                  << header.at("metadata").dump(2) << "\n";
        std::vector<std::pair<std::string, int64_t>> counts;
        for (const auto& entry : header.at("entries")) {
            if (entry.at("dtype") != "f32") continue;
            int64_t count = 1;
            for (const auto& d : entry.at("shape")) count *= d.get<int64_t>();
            const std::string name = entry.at("name");
            if (name.find('/') == std::string::npos) counts.emplace_back(name, count);  // optimizer state has a '/'
        }
        print_parameter_groups(counts);
        const auto checkpoint = hnas::io::Checkpoint::load(options->path);
        for (const auto& [name, count] : counts) {
            if (name.size() < 12 || name.substr(name.size() - 12) != "hybrid_theta") continue;
            std::printf("hybrid u  %-50s", name.substr(0, name.size() - 18).c_str());
            const hnas::Tensor theta = checkpoint.tensor(name);
            for (int64_t h = 0; h < theta.numel(); ++h) std::printf(" %.4f", 1.0 / (1.0 + std::exp(-theta.data()[h])));
            std::printf("\n");
        }
    });
}

}  // namespace

// OpenMP's default wait policy spins for a while at every barrier. hnas runs a data-prefetch thread
// beside the OpenMP pool, so on a 2-core machine a spinning worker often waits for a descheduled one,
// and a training step was measured 3.8x slower than with passive waiting. libgomp reads the policy
// when it loads, before main, hence the re-execution; an explicit OMP_WAIT_POLICY is respected.
void prefer_passive_openmp_waiting(char** argv) {
    if (std::getenv("OMP_WAIT_POLICY") != nullptr) return;
    setenv("OMP_WAIT_POLICY", "PASSIVE", 1);
    execv("/proc/self/exe", argv);  // returns only on failure: then run with the default policy
}

int main(int argc, char** argv) {
    prefer_passive_openmp_waiting(argv);
    CLI::App app{"hnas: Transformer training with doubly-normalized attention"};
    app.require_subcommand(0, 1);
    bool show_version = false;
    app.add_flag("--version", show_version, "Print the version and the oneDNN backend, then exit");
    add_demo_command(app);
    add_rouge_command(app);
    add_inspect_command(app);
    int exit_code = 0;
    add_train_command(app, exit_code);
    add_vocab_command(app);
    try {
        app.parse(argc, argv);
    } catch (const CLI::ParseError& e) {
        return app.exit(e);
    } catch (const std::exception& e) {
        spdlog::error("{}", e.what());
        return 1;
    }
    if (show_version) {
        std::cout << "hnas " << HNAS_VERSION << " (" << hnas::backend::describe() << ")\n";
    } else if (app.get_subcommands().empty()) {
        std::cout << app.help();
    }
    return exit_code;
}
