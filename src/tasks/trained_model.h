// A trained model as its checkpoint holds it: the resolved experiment config, the SentencePiece
// tokenizer, the parameters and the step — everything decoding and the analyses need.
#pragma once

#include <memory>
#include <string>

#include "config/experiment_config.h"
#include "data/tokenizer.h"
#include "io/checkpoint.h"
#include "models/model.h"

namespace hnas::tasks {

// What a checkpoint of hnas train holds besides the model: its entries, step, resolved config and
// tokenizer. The tasks build their own typed models from it (src/tasks/).
struct TrainedCheckpoint {
    io::Checkpoint checkpoint;
    int64_t step = 0;
    config::ExperimentConfig config;  // with the vocabulary size filled in
    data::Tokenizer tokenizer;
};

// The resolved config a checkpoint was trained with (its metadata's "config", upgraded to today's keys);
// the error names the file when it has none.
config::ExperimentConfig saved_config(const io::Checkpoint& checkpoint);

// Loads and verifies a checkpoint written by `hnas train`; errors name the file and what is missing.
TrainedCheckpoint read_trained_checkpoint(const std::string& checkpoint_path);

struct TrainedModel {
    std::string path;
    int64_t step = 0;
    config::ExperimentConfig config;
    data::Tokenizer tokenizer;
    std::unique_ptr<Rng> dropout_rng;   // the model's dropout layers refer to it (unused in evaluation)
    std::unique_ptr<models::Model> model;  // in evaluation mode

};

// Loads and verifies a checkpoint written by `hnas train`; errors name the file and what is missing.
TrainedModel load_trained_model(const std::string& checkpoint_path);

}  // namespace hnas::tasks
