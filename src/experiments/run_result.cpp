#include "experiments/run_result.h"

#include <spdlog/spdlog.h>

#include <chrono>
#include <limits>

#include "base/atomic_file.h"
#include "base/check.h"
#include "base/read_file.h"
#include "tasks/trained_model.h"
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
    const std::vector<std::string> lines = read_lines(path.string(), "metrics log");
    for (size_t i = 0; i < lines.size(); ++i) {
        // A line being written, or one a killed run left unfinished (a resumed run appends to it); report
        // and sweep skip these too.
        if (!Json::accept(lines[i])) continue;
        const std::string where = "test: metrics log " + path.string() + ":" + std::to_string(i + 1) + ":";
        const Json record = parse_json(lines[i], where);
        if (record.contains("loss")) {
            const auto field = [&](const char* key) -> const Json& {
                HNAS_CHECK(record.contains(key), where, " a progress record (with \"loss\") has no \"", key, "\"");
                return record.at(key);
            };
            summary["steps"] = json_integer(field("step"), 0, std::numeric_limits<int64_t>::max(), where + " step");
            summary["final_train_loss"] = record.at("loss");
            tokens_per_second += json_number(field("input_tokens_per_second"), where + " input_tokens_per_second");
            ++progress_records;
        }
        if (record.contains("best_metric")) summary["best_validation_metric"] = record.at("best_metric");
    }
    if (progress_records > 0) summary["input_tokens_per_second"] = tokens_per_second / static_cast<double>(progress_records);
    return summary;
}

}  // namespace

Json test_run(const fs::path& run_dir, const std::vector<std::string>& overrides, const TestDestination& destination) {
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
    const fs::path checkpoint = checkpoint_to_test(run_dir, tasks::parse_config(resolved).test.checkpoint);
    tasks::TrainedCheckpoint trained = tasks::read_trained_checkpoint(checkpoint.string());
    // The checkpoint's config with the run's test section (the task's test keys among it) in place of its own.
    Json tested = trained.config.resolved;
    tested["test"] = resolved.at("test");
    const int64_t vocab_size = trained.config.model.vocab_size;
    trained.config = tasks::parse_config(tested);
    trained.config.model.vocab_size = vocab_size;
    spdlog::info("test: {} (step {}, task {})", checkpoint.string(), trained.step, trained.config.task->name);

    const auto start = std::chrono::steady_clock::now();
    const tasks::TestResult test = tasks::task_definition(*trained.config.task).test(trained);
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    Json result = {{"run", run_dir.string()},
                   {"checkpoint", checkpoint.string()},
                   {"step", trained.step},
                   {"task", trained.config.task->name},
                   {"seed", trained.config.seed},
                   {"attention", trained.config.resolved.at("model").at("attention")},
                   {"metrics", test.metrics},
                   {"per_example", test.per_example},
                   {"training", training_summary(run_dir)},
                   {"test_settings", test.settings},
                   {"test_seconds", seconds}};
    if (!destination.intervention.is_null()) result["intervention"] = destination.intervention;
    const fs::path folder = destination.folder.empty() ? run_dir : destination.folder;
    fs::create_directories(folder);
    if (!test.outputs.empty()) {
        std::string text;
        for (const std::string& line : test.outputs) text.append(line).push_back('\n');
        write_file_atomically((folder / kTestOutputsFile).string(), text);
    }
    write_file_atomically((folder / kResultFile).string(), result.dump(1) + "\n");
    return result;
}

std::optional<Json> read_run_result(const fs::path& run_dir) {
    const fs::path path = run_dir / kResultFile;
    if (!fs::exists(path)) return std::nullopt;
    return parse_json(read_file(path.string(), "run result"), "run result " + path.string() + ":");
}

}  // namespace hnas::experiments
