// The hybrid weights u = sigmoid(θ) of every hnas attention, per layer and head (paper 004, Figs. 3-5):
// over training from a run's metrics log, or at one checkpoint.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <utility>
#include <vector>

#include "tasks/trained_model.h"

namespace hnas::analysis {

struct HybridWeights {
    int64_t step = 0;
    std::vector<std::pair<std::string, std::vector<double>>> attentions;  // (attention path, u per head)
};

// Every logged point of a run directory's metrics.jsonl, by step; when a resumed run logged a step
// again, its last record counts. Throws when the run logged no hybrid weights (no hnas attention).
std::vector<HybridWeights> hybrid_weights_of_run(const std::string& run_dir);

// The weights held by a checkpoint's model. Throws when it has no hnas attention.
HybridWeights hybrid_weights_of_model(const tasks::TrainedModel& trained);

// {"source": str, "points": [{"step", "attentions": [{"name", "u": [...]}]}]}; scripts/plot_analysis.py
// draws it.
nlohmann::ordered_json to_json(const std::string& source, const std::vector<HybridWeights>& points);

}  // namespace hnas::analysis
