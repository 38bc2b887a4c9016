#include "train/vocabulary.h"

#include <spdlog/spdlog.h>
#include <stdlib.h>

#include <cerrno>
#include <cstring>
#include <filesystem>

#include "base/read_file.h"

namespace hnas::train {

namespace fs = std::filesystem;

data::Tokenizer load_tokenizer(const config::TokenizerConfig& tokenizer) {
    return tokenizer.type == data::TokenizerType::wordpiece ? data::Tokenizer::load_wordpiece(tokenizer.model) : data::Tokenizer::load(tokenizer.model);
}

const io::Checkpoint* tokenizer_checkpoint(const config::ExperimentConfig& config, const std::optional<io::Checkpoint>& resumed,
                                           const std::optional<io::Checkpoint>& pretrained) {
    if (resumed) return &*resumed;
    if (config.tokenizer.model.empty() && pretrained) return &*pretrained;
    return nullptr;
}

PlannedVocabulary planned_vocabulary(const tasks::TaskDefinition& task, const config::ExperimentConfig& config,
                                     const io::Checkpoint* tokenizer_source) {
    if (task.fixed_tokenizer) return {task.fixed_tokenizer(config).vocab_size(), "the task's own tokenizer"};
    if (config.model.vocab_size > 0) return {config.model.vocab_size, "model.vocab_size"};
    if (tokenizer_source) {
        return {data::Tokenizer::from_serialized(tokenizer_source->bytes("tokenizer.model")).vocab_size(),
                "the tokenizer of " + tokenizer_source->path()};
    }
    if (!config.tokenizer.model.empty()) return {load_tokenizer(config.tokenizer).vocab_size(), "tokenizer.model " + config.tokenizer.model};
    return {config.tokenizer.vocab_size, "tokenizer.vocab_size (the tokenizer a run trains from its data)"};
}

RunTokenizer train_run_tokenizer(const std::vector<tasks::DataFile>& files, const config::ExperimentConfig& config) {
    data::TokenizerTrainOptions options;
    options.inputs = config.tokenizer.inputs;
    if (options.inputs.empty()) {
        for (const tasks::DataFile& file : files) {
            if (file.training) options.inputs.push_back(file.path);
        }
    }
    HNAS_CHECK(!options.inputs.empty(), "train: task ", config.task->name, " has no text files to train a ",
               "tokenizer on; set tokenizer.model, tokenizer.inputs or init_from (a pretrained model brings its tokenizer)");
    std::string folder_template = (fs::temp_directory_path() / "hnas-tokenizer-XXXXXX").string();
    HNAS_CHECK(::mkdtemp(folder_template.data()) != nullptr, "train: cannot create a temporary folder in ",
               fs::temp_directory_path().string(), " for the tokenizer: ", std::strerror(errno));
    const fs::path folder(folder_template);
    struct RemoveFolder {
        fs::path path;
        ~RemoveFolder() {
            std::error_code ignored;
            fs::remove_all(path, ignored);
        }
    } remove_folder{folder};
    options.model_prefix = (folder / "tokenizer").string();
    options.vocab_size = config.tokenizer.vocab_size;
    options.type = config.tokenizer.type;
    options.input_sentence_size = config.tokenizer.input_sentence_size;
    options.seed = config.seed;
    options.damaged_lines = config.data.damaged_lines;
    spdlog::info("training a {} tokenizer of {} pieces on {} file(s)", name_of(options.type), options.vocab_size, options.inputs.size());
    data::train_tokenizer(options);
    RunTokenizer result{data::Tokenizer::load(options.model_prefix + ".model"), {}};
    result.files = {{"tokenizer.model", result.tokenizer.serialized_model()},
                    {"tokenizer.vocab", read_file(options.model_prefix + ".vocab", "the trained tokenizer's vocabulary")}};
    return result;
}

}  // namespace hnas::train
