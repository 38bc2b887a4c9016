// result.json: what a finished run scored on its config's test data (config section test),
// beside what its training reached. `hnas test` writes it; a sweep writes it for each trial once the
// trial has trained, and a trial that holds one is finished.
#pragma once

#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "base/json.h"

namespace hnas::experiments {

inline constexpr const char* kResultFile = "result.json";
// The test outputs, one line per test example (headline: the best headline), beside result.json.
inline constexpr const char* kTestOutputsFile = "test_outputs.txt";

// Where a test's result goes, and what was done to the model for it.
struct TestDestination {
    std::filesystem::path folder;  // empty: the run directory itself
    Json intervention;             // null: none; else kept as the result's "intervention" (a test-time change)
};

// Scores the run's checkpoint that test.checkpoint names with its task's test (`overrides` of the
// test section, "test.beam=5", apply on top of the run's config), writes result.json and the test
// outputs atomically and returns the result:
//   {"run", "checkpoint", "step", "task", "seed", "attention", "metrics": {name: value},
//    "per_example": {metric: [value per test example]}, "training": {...}, "test_settings": {...}}
Json test_run(const std::filesystem::path& run_dir, const std::vector<std::string>& overrides = {},
              const TestDestination& destination = {});

// The run's result.json; nullopt when it has none (not tested yet).
std::optional<Json> read_run_result(const std::filesystem::path& run_dir);

}  // namespace hnas::experiments
