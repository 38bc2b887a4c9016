#include "analysis/hybrid_weights.h"

#include <filesystem>
#include <fstream>
#include <limits>
#include <map>

#include "base/json.h"
#include "models/model_factory.h"

namespace hnas::analysis {

std::vector<HybridWeights> hybrid_weights_of_run(const std::string& run_dir) {
    const std::string path = (std::filesystem::path(run_dir) / "metrics.jsonl").string();
    std::ifstream in(path);
    HNAS_CHECK(in, "analyze hybrid: cannot read ", path, " (is ", run_dir, " a run directory of hnas train?)");
    std::map<int64_t, HybridWeights> by_step;
    std::string line;
    for (int64_t number = 1; std::getline(in, line); ++number) {
        if (line.empty()) continue;
        Json record;
        try {
            record = parse_json(line, path + ":" + std::to_string(number) + ": not JSON:");
        } catch (const Error& e) {
            // A run killed while writing leaves a partial last line; anything else is damage.
            if (in.peek() != std::char_traits<char>::eof()) throw;
            continue;
        }
        if (!record.contains("hybrid_u") || !record.contains("step") || record.at("hybrid_u").empty()) continue;
        const int64_t step = json_integer(record.at("step"), 0, std::numeric_limits<int64_t>::max(),
                                          path + ":" + std::to_string(number) + ": step");
        HybridWeights point{step, {}};
        for (const auto& [name, values] : record.at("hybrid_u").items()) {
            point.attentions.emplace_back(name, values.get<std::vector<double>>());
        }
        by_step[point.step] = std::move(point);
    }
    HNAS_CHECK(!by_step.empty(), "analyze hybrid: ", path, " holds no hybrid weights (the model has no hnas attention)");
    std::vector<HybridWeights> points;
    for (auto& [step, point] : by_step) points.push_back(std::move(point));
    return points;
}

HybridWeights hybrid_weights_of_model(const tasks::TrainedModel& trained) {
    HybridWeights point{trained.step, {}};
    for (const auto& [name, attention] : trained.model->attentions()) {
        for (const auto& values : attention->head_values()) {
            if (values.name == "u") point.attentions.emplace_back(name, std::vector<double>(values.values.begin(), values.values.end()));
        }
    }
    HNAS_CHECK(!point.attentions.empty(), "analyze hybrid: ", trained.path, " has no hnas attention");
    return point;
}

nlohmann::ordered_json to_json(const std::string& source, const std::vector<HybridWeights>& points) {
    nlohmann::ordered_json out = {{"source", source}, {"points", nlohmann::ordered_json::array()}};
    for (const auto& point : points) {
        nlohmann::ordered_json attentions = nlohmann::ordered_json::array();
        for (const auto& [name, u] : point.attentions) attentions.push_back({{"name", name}, {"u", u}});
        out["points"].push_back({{"step", point.step}, {"attentions", attentions}});
    }
    return out;
}

}  // namespace hnas::analysis
