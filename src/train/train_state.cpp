#include "train/train_state.h"

#include <algorithm>
#include <limits>
#include <nlohmann/json.hpp>

#include "base/check.h"

namespace hnas::train {

void save_state(const TrainState& state, Json& metadata) {
    metadata["step"] = state.step;
    metadata["optimizer_steps"] = state.optimizer_steps;
    metadata["schedule_offset"] = state.schedule_offset;
    Json rng = Json::array();
    for (uint64_t word : state.dropout_rng) rng.push_back(word);
    metadata["dropout_rng"] = rng;
    nlohmann::json position;
    data::to_json(position, state.data_position);
    metadata["data_position"] = Json::parse(position.dump());
    metadata["best_metric"] = state.best_metric ? Json(*state.best_metric) : Json();
    metadata["stale_validations"] = state.stale_validations;
}

TrainState load_state(const Json& metadata) {
    HNAS_CHECK(metadata.is_object(), "checkpoint: the training state is not a JSON object");
    auto count = [&](const char* key) {
        HNAS_CHECK(metadata.contains(key), "checkpoint: the training state has no '", key, "'");
        return json_integer(metadata.at(key), 0, std::numeric_limits<int64_t>::max(),
                            std::string("checkpoint: the training state's '") + key + "'");
    };
    TrainState state;
    state.step = count("step");
    state.optimizer_steps = count("optimizer_steps");
    state.schedule_offset = count("schedule_offset");
    const Json* rng = metadata.contains("dropout_rng") ? &metadata.at("dropout_rng") : nullptr;
    HNAS_CHECK(rng && rng->is_array() && rng->size() == state.dropout_rng.size() &&
                   std::all_of(rng->begin(), rng->end(), [](const Json& word) { return word.is_number_unsigned(); }),
               "checkpoint: the training state's 'dropout_rng' must be a list of ", state.dropout_rng.size(), " unsigned integers");
    for (size_t i = 0; i < state.dropout_rng.size(); ++i) state.dropout_rng[i] = (*rng)[i].get<uint64_t>();
    HNAS_CHECK(metadata.contains("data_position"), "checkpoint: the training state has no 'data_position'");
    data::from_json(metadata.at("data_position"), state.data_position);
    HNAS_CHECK(metadata.contains("best_metric"), "checkpoint: the training state has no 'best_metric'");
    const Json& best = metadata.at("best_metric");
    HNAS_CHECK(best.is_null() || best.is_number(), "checkpoint: the training state's 'best_metric' must be a number or null, got ", best.dump());
    if (!best.is_null()) state.best_metric = best.get<double>();
    state.stale_validations = count("stale_validations");
    return state;
}

}  // namespace hnas::train
