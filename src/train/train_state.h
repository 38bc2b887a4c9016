// Everything a training run carries from step to step besides the parameters and the optimizer's
// moments, saved in a checkpoint's metadata and restored from it by one mirrored pair of functions
// (adding a field edits both, side by side).
#pragma once

#include <cstdint>
#include <optional>

#include "base/json.h"
#include "base/rng.h"
#include "data/batching.h"

namespace hnas::train {

struct TrainState {
    int64_t step = 0;                    // optimizer steps taken by the run, over all its starts
    int64_t optimizer_steps = 0;         // steps the optimizer's moments have seen (0 after --reset-optimizer)
    int64_t schedule_offset = 0;         // the step the learning-rate schedule counts from
    Rng::State dropout_rng{};
    data::DataPosition data_position;    // the next training batch
    std::optional<double> best_metric;   // best validation metric so far
    int64_t stale_validations = 0;       // validations since the best one (early stopping)
};

// Writes the state's keys into a checkpoint's metadata object.
void save_state(const TrainState& state, Json& metadata);
// Reads them back; throws naming a missing or malformed key.
TrainState load_state(const Json& metadata);

}  // namespace hnas::train
