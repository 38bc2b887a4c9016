// Where a run's vocabulary comes from, decided before any tokenizer is trained: the task's fixed
// tokenizer, the checkpoint it resumes from or is initialized from, the tokenizer file the config
// names, or a tokenizer trained from the data (tokenizer.vocab_size pieces). `hnas train` and
// `hnas inspect` share these, so inspect shows the model a run would build.
#pragma once

#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "config/experiment_config.h"
#include "data/tokenizer.h"
#include "io/checkpoint.h"
#include "tasks/task.h"

namespace hnas::train {

// The tokenizer file a config names: a SentencePiece model or a WordPiece vocab.txt.
data::Tokenizer load_tokenizer(const config::TokenizerConfig& tokenizer);

// The checkpoint whose tokenizer a run uses instead of training one: the one it resumes from, else the
// one it is initialized from (a pretrained encoder keeps its vocabulary), unless tokenizer.model is set.
const io::Checkpoint* tokenizer_checkpoint(const config::ExperimentConfig& config, const std::optional<io::Checkpoint>& resumed,
                                           const std::optional<io::Checkpoint>& pretrained);

// The vocabulary size a run will have, and where it comes from ("model.vocab_size", "tokenizer.model
// data/x.model", ...), known without training a tokenizer.
struct PlannedVocabulary {
    int64_t size = 0;
    std::string source;
};
PlannedVocabulary planned_vocabulary(const tasks::TaskDefinition& task, const config::ExperimentConfig& config,
                                     const io::Checkpoint* tokenizer_source);

// A tokenizer trained from the data for a new run: trained in a temporary folder, so that nothing
// reaches the run directory before the run starts (RunTokenizer::files are written then).
struct RunTokenizer {
    data::Tokenizer tokenizer;
    std::vector<std::pair<std::string, std::string>> files;  // name in the run directory, contents
};
RunTokenizer train_run_tokenizer(const std::vector<tasks::DataFile>& files, const config::ExperimentConfig& config);

}  // namespace hnas::train
