// The typed form of an experiment's JSON config (documented option by option in configs/README.md).
// It is parsed once, at the edge, by parse_experiment_config; everything downstream takes plain values.
#pragma once

#include <string>
#include <vector>

#include "config/config_node.h"
#include "models/model_config.h"

namespace hnas::config {

enum class Task { headline, mlm };

struct ExperimentConfig {
    Task task = Task::headline;
    uint64_t seed = 1;
    models::ModelConfig model;
    std::string init_from;  // headline only: an MLM checkpoint for ⟨BERT,BERT⟩ initialization
    Json resolved;          // the whole config with every default filled in
};

// Parses and validates `raw`; `source` names the file in messages.
ExperimentConfig parse_experiment_config(const Json& raw);
// Reads the file, applies `overrides` ("model.layers=2"), then parses.
ExperimentConfig load_experiment_config(const std::string& path, const std::vector<std::string>& overrides = {});

}  // namespace hnas::config
