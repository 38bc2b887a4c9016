// `hnas inspect`: checkpoints and configs.
#include <cmath>
#include <filesystem>
#include <iostream>
#include <memory>
#include <optional>

#include "base/number_format.h"
#include "base/atomic_file.h"
#include "base/read_file.h"
#include "cli/commands.h"
#include "command_line/validators.h"
#include "config/experiment_config.h"
#include "io/checkpoint.h"
#include "models/model_factory.h"
#include "tasks/task.h"
#include "train/vocabulary.h"

namespace hnas::cli {

namespace {
void print_parameter_groups(const std::vector<std::pair<std::string, int64_t>>& parameters) {
    int64_t total = 0;
    for (const auto& [name, count] : parameters) total += count;
    fmt::print("parameters: {} ({:.2f} M)\n", total, portable(static_cast<double>(total) / 1e6));
    for (const auto& [group, count] : models::group_parameter_counts(parameters)) fmt::print("  {:<40} {:>12}\n", group, count);
}

// (attention path, its gate θ's parameter name) for every hnas attention of the checkpoint's model: the
// parameters whose role is the hybrid gate, found in the model its config builds.
std::vector<std::pair<std::string, std::string>> hybrid_gates(const io::Checkpoint& checkpoint) {
    config::ExperimentConfig config = tasks::saved_config(checkpoint);
    config.model.vocab_size = json_integer(checkpoint.metadata().value("vocab_size", Json(1)), 1, config::kMaxVocabulary,
                                           checkpoint.path() + ": the metadata's vocab_size");
    Rng init(config.seed, 0), dropout(config.seed, 1);
    const auto model = models::build_model(config.model, init, dropout);
    std::vector<std::pair<std::string, std::string>> gates;
    for (const auto& [name, attention] : model->attentions()) {
        for (const nn::NamedParameter& parameter : attention->named_parameters()) {
            if (parameter.role == nn::ParameterRole::hybrid_gate) gates.emplace_back(name, name + "." + parameter.name);
        }
    }
    return gates;
}

}  // namespace

// `hnas inspect`: a checkpoint's header, parameter counts and hybrid weights; or, for a .json config,
// the resolved config and the parameter counts of the model it builds; or, with --defaults, the table
// of every config key.
void add_inspect_command(CLI::App& app) {
    struct Options {
        std::string path;
        std::vector<std::string> overrides;
        int64_t vocab_size = 0;
        bool defaults = false;
        std::string into;
    };
    auto options = std::make_shared<Options>();
    auto* command = app.add_subcommand("inspect", "Show a checkpoint (header, parameter counts, hybrid u), a config, or every config key");
    auto* path = command->add_option("path", options->path, "A checkpoint file, or a config (.json)")->check(CLI::ExistingFile);
    command->add_option("--set", options->overrides, "Config override key.path=value (configs only)");
    command->add_option("--vocab-size", options->vocab_size, "Vocabulary for configs that take it from the tokenizer")
        ->check(command_line::positive_integer<int64_t>());
    auto* defaults = command->add_flag("--defaults", options->defaults,
                                       "Print every config key of every task: type, default, tasks, meaning (markdown)");
    command->add_option("--into", options->into, "With --defaults: replace the tables between the markers of this file "
                                                 "(configs/README.md) instead of printing them")
        ->needs(defaults)
        ->check(CLI::ExistingFile);
    defaults->excludes(path);
    command->callback([options] {
        if (options->defaults) {
            if (options->into.empty()) {
                std::cout << tasks::key_tables();
            } else {
                write_file_atomically(options->into, tasks::with_key_tables(read_file(options->into, "config docs"), options->into));
            }
            return;
        }
        HNAS_CHECK(!options->path.empty(), "inspect: give a checkpoint or a config, or --defaults");
        if (options->path.size() > 5 && options->path.substr(options->path.size() - 5) == ".json") {
            // with what training fills in from the data (a classification file's labels, the images' classes)
            config::ExperimentConfig config = tasks::completed_config(tasks::load_config(options->path, options->overrides));
            std::cout << config.resolved.dump(2) << "\n";
            if (config.model.vocab_size == 0) {
                // A fine-tuning config's init_from may name a run not trained yet: its tokenizer would decide.
                const bool pretrained_exists = !config.init_from.empty() && std::filesystem::exists(config.init_from);
                std::optional<io::Checkpoint> pretrained;
                if (pretrained_exists) pretrained = io::Checkpoint::load(config.init_from);
                train::PlannedVocabulary vocabulary =
                    options->vocab_size > 0 ? train::PlannedVocabulary{options->vocab_size, "--vocab-size"}
                                            : train::planned_vocabulary(tasks::task_definition(*config.task), config,
                                                                        train::tokenizer_checkpoint(config, std::nullopt, pretrained));
                if (!config.init_from.empty() && !pretrained_exists && options->vocab_size == 0) {
                    vocabulary.source += " until init_from " + config.init_from + " exists (its tokenizer decides; --vocab-size sets another)";
                }
                config.model.vocab_size = vocabulary.size;
                fmt::print("vocabulary: {} pieces, from {}\n", vocabulary.size, vocabulary.source);
            }
            Rng init(config.seed, 0), dropout(config.seed, 1);
            const auto model = models::build_model(config.model, init, dropout);
            std::vector<std::pair<std::string, int64_t>> counts;
            for (const auto& named : model->named_parameters()) counts.emplace_back(named.name, named.parameter.numel());
            print_parameter_groups(counts);
            return;
        }
        const auto checkpoint = io::Checkpoint::load(options->path);
        std::cout << "format version " << checkpoint.header().at("format_version") << "\nmetadata:\n"
                  << checkpoint.metadata().dump(2) << "\n";
        std::vector<std::pair<std::string, int64_t>> counts;
        for (const io::EntryInfo& entry : checkpoint.entries()) {
            // parameters only: optimizer state has a '/' in its name
            if (entry.type == io::EntryType::f32 && entry.name.find('/') == std::string::npos) counts.emplace_back(entry.name, shape_numel(entry.shape));
        }
        print_parameter_groups(counts);
        for (const auto& [attention, gate] : hybrid_gates(checkpoint)) {
            fmt::print("hybrid u  {:<50}", attention);
            const Tensor theta = checkpoint.tensor(gate);
            for (int64_t h = 0; h < theta.numel(); ++h) {
                fmt::print(" {:.4f}", portable(1.0 / (1.0 + std::exp(-theta.data()[h]))));
            }
            fmt::print("\n");
        }
    });
}

}  // namespace hnas::cli
