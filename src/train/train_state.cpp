#include "train/train_state.h"

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
    try {
        TrainState state;
        state.step = metadata.at("step").get<int64_t>();
        state.optimizer_steps = metadata.at("optimizer_steps").get<int64_t>();
        state.schedule_offset = metadata.at("schedule_offset").get<int64_t>();
        const Json& rng = metadata.at("dropout_rng");
        HNAS_CHECK(rng.is_array() && rng.size() == state.dropout_rng.size(), "checkpoint: malformed dropout_rng");
        for (size_t i = 0; i < state.dropout_rng.size(); ++i) state.dropout_rng[i] = rng[i].get<uint64_t>();
        data::from_json(metadata.at("data_position"), state.data_position);
        if (!metadata.at("best_metric").is_null()) state.best_metric = metadata.at("best_metric").get<double>();
        state.stale_validations = metadata.at("stale_validations").get<int64_t>();
        return state;
    } catch (const nlohmann::json::exception& e) {
        throw Error(std::string("checkpoint: malformed training state: ") + e.what());
    }
}

}  // namespace hnas::train
