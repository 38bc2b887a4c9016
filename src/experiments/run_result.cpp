#include "experiments/run_result.h"

#include <spdlog/spdlog.h>

#include <chrono>

#include "base/atomic_file.h"
#include "base/check.h"
#include "base/read_file.h"
#include "decode/trained_model.h"
#include "tasks/task.h"
#include "train/run_directory.h"

namespace hnas::experiments {

namespace fs = std::filesystem;

namespace {

// The checkpoint test.checkpoint names: best.ckpt (the newest step checkpoint when the run never
// validated), or the newest step checkpoint.
fs::path checkpoint_to_test(const fs::path& run_dir, config::TestCheckpoint which) {
    const train::RunDirectory run(run_dir);
    if (which == config::TestCheckpoint::best && fs::exists(run_dir / "best.ckpt")) return run_dir / "best.ckpt";
    const auto steps = run.step_checkpoints();
    HNAS_CHECK(!steps.empty(), "test: ", run_dir.string(), " holds no checkpoint; train the run first");
    return steps.back();
}

// What metrics.jsonl says of the training: the last training loss, the best validation metric, and the
// mean throughput over the progress records.
Json training_summary(const fs::path& run_dir) {
    Json summary = Json::object();
    const fs::path path = run_dir / "metrics.jsonl";
    if (!fs::exists(path)) return summary;
    double tokens_per_second = 0.0;
    int64_t progress_records = 0;
    for (const std::string& line : read_lines(path.string(), "metrics log")) {
        if (line.empty()) continue;
        const Json record = parse_json(line, "metrics log " + path.string() + ":");
        if (record.contains("loss")) {
            summary["steps"] = record.at("step");
            summary["final_train_loss"] = record.at("loss");
            if (record.at("input_tokens_per_second").is_number()) {
                tokens_per_second += record.at("input_tokens_per_second").get<double>();
                ++progress_records;
            }
        }
        if (record.contains("best_metric")) summary["best_validation_metric"] = record.at("best_metric");
    }
    if (progress_records > 0) summary["input_tokens_per_second"] = tokens_per_second / static_cast<double>(progress_records);
    return summary;
}

}  // namespace

Json test_run(const fs::path& run_dir, const std::vector<std::string>& overrides) {
    HNAS_CHECK(fs::is_directory(run_dir), "test: ", run_dir.string(), " is not a run directory");
    // The test section of the run's config, with the overrides on top, says what to score and how.
    const fs::path config_path = run_dir / "config.json";
    Json resolved = config::upgrade_saved_config(
        parse_json(read_file(config_path.string(), "run config"), "run config " + config_path.string() + ":"));
    for (const std::string& assignment : overrides) {
        HNAS_CHECK(assignment.starts_with("test."), "test: --set ", assignment,
                   ": only the test section's keys (test.…) apply to a trained run");
        config::apply_override(resolved, assignment);
    }
    const config::TestConfig test_config = config::parse_experiment_config(resolved).test;
    const fs::path checkpoint = checkpoint_to_test(run_dir, test_config.checkpoint);
    decode::TrainedCheckpoint trained = decode::read_trained_checkpoint(checkpoint.string());
    trained.config.test = test_config;
    spdlog::info("test: {} (step {}, task {})", checkpoint.string(), trained.step, name_of(trained.config.task));

    const auto start = std::chrono::steady_clock::now();
    const tasks::TestResult test = tasks::task_definition(trained.config.task).test(trained);
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    Json result = {{"run", run_dir.string()},
                   {"checkpoint", checkpoint.string()},
                   {"step", trained.step},
                   {"task", name_of(trained.config.task)},
                   {"seed", trained.config.seed},
                   {"attention", trained.config.resolved.at("model").at("attention")},
                   {"metrics", test.metrics},
                   {"per_example", test.per_example},
                   {"training", training_summary(run_dir)},
                   {"test_settings", test.settings},
                   {"test_seconds", seconds}};
    if (!test.outputs.empty()) {
        std::string text;
        for (const std::string& line : test.outputs) text.append(line).push_back('\n');
        write_file_atomically((run_dir / kTestOutputsFile).string(), text);
    }
    write_file_atomically((run_dir / kResultFile).string(), result.dump(1) + "\n");
    return result;
}

std::optional<Json> read_run_result(const fs::path& run_dir) {
    const fs::path path = run_dir / kResultFile;
    if (!fs::exists(path)) return std::nullopt;
    return parse_json(read_file(path.string(), "run result"), "run result " + path.string() + ":");
}

}  // namespace hnas::experiments
