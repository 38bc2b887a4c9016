#include "experiments/sweep.h"

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <spdlog/spdlog.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <csignal>
#include <deque>
#include <filesystem>
#include <limits>
#include <memory>
#include <optional>
#include <thread>

#include "base/atomic_file.h"
#include "base/check.h"
#include "base/number_format.h"
#include "base/read_file.h"
#include "config/experiment_config.h"
#include "tasks/task.h"
#include "experiments/child_process.h"
#include "experiments/compare.h"
#include "experiments/prediction.h"
#include "experiments/run_result.h"
#include "train/run_directory.h"

namespace hnas::experiments {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

namespace {

struct Trial {
    std::string setting;
    int64_t seed = 0;
    std::vector<std::string> assignments;  // every --set of its `hnas train`
    fs::path dir;                          // OUT/<setting>/seed-<k>: the run directory
    int64_t steps = 0;

    fs::path sidecar(const char* extension) const { return dir.parent_path() / (dir.filename().string() + extension); }
    std::string label() const { return setting + "/" + dir.filename().string(); }
};

// Every trial, its config parsed now: a bad setting stops the sweep before anything is written.
std::vector<Trial> plan_trials(const SweepOptions& o) {
    std::vector<Trial> trials;
    for (const Setting& setting : o.settings) {
        for (int64_t seed = o.first_seed; seed < o.first_seed + o.seeds; ++seed) {
            Trial trial{setting.name, seed, o.overrides, fs::path(o.out) / setting.name / ("seed-" + std::to_string(seed)), 0};
            for (const std::string& assignment : setting.assignments()) trial.assignments.push_back(assignment);
            trial.assignments.push_back("seed=" + std::to_string(seed));
            try {
                trial.steps = tasks::load_config(o.config, trial.assignments).train.steps;
            } catch (const std::exception& e) {
                throw Error("sweep: setting " + setting.name + ", seed " + std::to_string(seed) + ": " + e.what());
            }
            trials.push_back(std::move(trial));
        }
    }
    return trials;
}

// sweep.json: what the sweep is, so that a rerun into the same folder continues the same sweep.
Json sweep_record(const SweepOptions& o, const std::optional<Prediction>& prediction) {
    Json settings = Json::array();
    for (const Setting& setting : o.settings) {
        Json overrides = Json::object();
        for (const Override& override_ : setting.overrides) overrides[override_.key] = override_.value;
        settings.push_back({{"name", setting.name}, {"overrides", overrides}});
    }
    Json seeds = Json::array();
    for (int64_t seed = o.first_seed; seed < o.first_seed + o.seeds; ++seed) seeds.push_back(seed);
    Json record = {{"config", o.config}, {"overrides", o.overrides}, {"settings", settings}, {"seeds", seeds}};
    // "prediction" stays the text, as sweeps wrote it before predictions were committed files.
    if (prediction) {
        record["prediction"] = prediction->text;
        record["prediction_file"] = prediction->file;
        record["prediction_commit"] = prediction->commit;
    }
    return record;
}

// The prediction a sweep's record holds, as an error names it.
std::string stated_prediction(const Json& record) {
    if (!record.contains("prediction")) return " began without a prediction";
    if (!record.contains("prediction_commit")) return " holds the prediction stated before its runs: " + record.at("prediction").dump();
    return " holds the prediction stated before its runs: " + record.value("prediction_file", Json()).dump() + " as committed in " +
           record.at("prediction_commit").dump();
}

void write_or_check_record(const SweepOptions& o, const std::optional<Prediction>& prediction,
                           const distributed::Communicator& world) {
    const fs::path path = fs::path(o.out) / kSweepFile;
    const Json record = sweep_record(o, prediction);
    if (fs::exists(path)) {
        const Json existing = parse_json(read_file(path.string(), "sweep record"), "sweep record " + path.string() + ":");
        for (const char* key : {"config", "overrides", "settings", "seeds"}) {
            HNAS_CHECK(existing.value(key, Json()) == record.at(key), "sweep: ", o.out, " holds another sweep (its ", key,
                       " differ: ", existing.value(key, Json()).dump(), " there, ", record.at(key).dump(),
                       " here); rerun it with the same arguments to continue it, or choose another --out");
        }
        bool same = true;
        for (const char* key : {"prediction", "prediction_file", "prediction_commit"}) {
            same = same && existing.value(key, Json()) == record.value(key, Json());
        }
        HNAS_CHECK(!prediction || same, "sweep: ", o.out, stated_prediction(existing),
                   "; a prediction is stated once, before the first run (rerun without --prediction to continue)");
    } else if (world.rank() == 0) {
        fs::create_directories(o.out);
        write_file_atomically(path.string(), record.dump(2) + "\n");
    }
}

// The trial's record beside its run directory (seed-<k>.trial.json): its setting, where and with how
// many threads it ran, and whether its training has ended (a rerun then only tests it).
Json read_trial_record(const Trial& trial) {
    const fs::path path = trial.sidecar(".trial.json");
    if (!fs::exists(path)) return Json::object();
    return parse_json(read_file(path.string(), "trial record"), "trial record " + path.string() + ":");
}
void write_trial_record(const Trial& trial, const Json& record) {
    write_file_atomically(trial.sidecar(".trial.json").string(), record.dump(2) + "\n");
}

// The step of the trial's last progress record in metrics.jsonl (0 before the first).
int64_t steps_reached(const Trial& trial) {
    const fs::path path = trial.dir / "metrics.jsonl";
    if (!fs::exists(path)) return 0;
    int64_t step = 0;
    const std::vector<std::string> lines = read_lines(path.string(), "metrics log");
    for (size_t i = 0; i < lines.size(); ++i) {
        if (!Json::accept(lines[i])) continue;  // a line being written
        const std::string where = "sweep: metrics log " + path.string() + ":" + std::to_string(i + 1) + ":";
        const Json record = parse_json(lines[i], where);
        if (!record.contains("loss")) continue;
        HNAS_CHECK(record.contains("step"), where, " a progress record (with \"loss\") has no \"step\"");
        step = json_integer(record.at("step"), 0, std::numeric_limits<int64_t>::max(), where + " step");
    }
    return step;
}

// An exclusive lock on a trial (seed-<k>.lock), passed on to its child processes: a child that
// outlives a killed sweep (it is checkpointing after SIGTERM) keeps the trial until it has stopped.
class TrialLock {
public:
    explicit TrialLock(const Trial& trial) {
        const fs::path path = trial.sidecar(".lock");
        fd_ = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
        HNAS_CHECK(fd_ >= 0, "sweep: cannot open ", path.string());
        if (::flock(fd_, LOCK_EX | LOCK_NB) == 0) return;
        spdlog::info("sweep: {} is held by another process (a previous sweep's child stopping?); waiting for it", trial.label());
        while (::flock(fd_, LOCK_EX) != 0) {
        }
    }
    ~TrialLock() { ::close(fd_); }
    TrialLock(const TrialLock&) = delete;
    TrialLock& operator=(const TrialLock&) = delete;
    int fd() const { return fd_; }

private:
    int fd_ = -1;
};

// SIGINT and SIGTERM stop the sweep: its children are told to checkpoint and stop.
std::atomic<int> g_signal{0};
class SignalScope {
public:
    SignalScope() {
        struct sigaction action {};
        action.sa_handler = [](int signal) { g_signal = signal; };
        sigemptyset(&action.sa_mask);
        sigaction(SIGINT, &action, &old_int_);
        sigaction(SIGTERM, &action, &old_term_);
    }
    ~SignalScope() {
        sigaction(SIGINT, &old_int_, nullptr);
        sigaction(SIGTERM, &old_term_, nullptr);
    }

private:
    struct sigaction old_int_ {}, old_term_ {};
};

enum class Phase { train, test };

struct Running {
    const Trial* trial;
    Phase phase;
    std::unique_ptr<TrialLock> lock;
    std::unique_ptr<ChildProcess> child;
    Clock::time_point start;
    int64_t first_step;
    Json record;
};

class SweepRunner {
public:
    SweepRunner(const SweepOptions& options, const distributed::Communicator& world, std::vector<Trial> trials)
        : o_(options), world_(world), trials_(std::move(trials)) {
        const int cores = distributed::threads_per_rank(0, world.local_size());
        HNAS_CHECK(o_.parallel <= cores, "sweep: --parallel ", o_.parallel, " is more trials at once than the ", cores,
                   " cores ", world.size() > 1 ? "of this rank" : "of this machine",
                   " (one thread each at least): the cores would be oversubscribed");
        threads_ = cores / o_.parallel;
    }

    SweepOutcome run() {
        for (size_t i = 0; i < trials_.size(); ++i) {
            if (static_cast<int>(i % static_cast<size_t>(world_.size())) != world_.rank()) continue;
            if (!fs::exists(trials_[i].dir / kResultFile)) queue_.push_back(&trials_[i]);
        }
        outcome_.trials = static_cast<int64_t>(trials_.size());
        spdlog::info("sweep: {} settings × {} seeds = {} trials in {}; {} to run here, {} at a time with {} threads each",
                     o_.settings.size(), o_.seeds, trials_.size(), o_.out, queue_.size(), o_.parallel, threads_);
        for (const Trial* trial : queue_) remaining_steps_ += trial->steps - steps_reached(*trial);
        SignalScope signals;
        auto last_report = Clock::now();
        while (!queue_.empty() || !running_.empty()) {
            if (g_signal != 0) return stop(g_signal.exchange(0));
            while (static_cast<int>(running_.size()) < o_.parallel && !queue_.empty()) {
                const Trial* trial = queue_.front();
                queue_.pop_front();
                start(*trial);
            }
            std::this_thread::sleep_for(std::chrono::milliseconds(200));
            for (size_t i = 0; i < running_.size();) {
                if (const auto status = running_[i].child->poll()) {
                    if (g_signal != 0) break;  // the child stopped because of the signal: stop() handles it
                    Running done = std::move(running_[i]);
                    running_.erase(running_.begin() + static_cast<std::ptrdiff_t>(i));
                    finished(std::move(done), *status);
                } else {
                    ++i;
                }
            }
            if (Clock::now() - last_report >= std::chrono::duration<double>(o_.progress_seconds)) {
                report_progress();
                last_report = Clock::now();
            }
        }
        if (world_.rank() == 0) wait_for_other_ranks();
        return outcome_;
    }

private:
    void start(const Trial& trial) {
        fs::create_directories(trial.dir.parent_path());
        Running r{&trial, Phase::train, std::make_unique<TrialLock>(trial), nullptr, Clock::now(), steps_reached(trial),
                  read_trial_record(trial)};
        if (fs::exists(trial.dir / kResultFile)) return;  // finished by the process that held the lock
        if (!r.record.value("trained", false)) {
            r.record = {{"setting", trial.setting}, {"seed", trial.seed},     {"overrides", trial.assignments},
                        {"rank", world_.rank()},    {"threads", threads_},    {"parallel", o_.parallel},
                        {"trained", false}};
            write_trial_record(trial, r.record);
        } else {
            r.phase = Phase::test;
        }
        launch(r);
        running_.push_back(std::move(r));
    }

    void launch(Running& r) {
        const Trial& trial = *r.trial;
        std::vector<std::string> argv = {o_.executable};
        if (r.phase == Phase::train) {
            argv.insert(argv.end(), {"train", "--config", o_.config, "--out", trial.dir.string()});
            for (const std::string& assignment : trial.assignments) argv.insert(argv.end(), {"--set", assignment});
            if (!train::RunDirectory(trial.dir).step_checkpoints().empty()) argv.push_back("--resume");
        } else {
            argv.insert(argv.end(), {"test", trial.dir.string()});
        }
        spdlog::info("sweep: {} {}{} (log {})", r.phase == Phase::train ? "training" : "testing", trial.label(),
                     r.phase == Phase::train && argv.back() == "--resume" ? fmt::format(", resumed at step {}", r.first_step) : "",
                     trial.sidecar(".log").string());
        r.start = Clock::now();
        r.child = std::make_unique<ChildProcess>(
            argv, child_environment({{"OMP_NUM_THREADS", std::to_string(threads_)}, {"NO_COLOR", "1"}}), trial.sidecar(".log"),
            r.lock->fd());
    }

    void finished(Running r, int status) {
        const Trial& trial = *r.trial;
        const double seconds = std::chrono::duration<double>(Clock::now() - r.start).count();
        const char* phase = r.phase == Phase::train ? "training" : "test";
        if (status != 0) {
            ++outcome_.failed;
            r.record["failed"] = fmt::format("{} exited with status {}", phase, status);
            write_trial_record(trial, r.record);
            spdlog::error("sweep: {}: {} failed (exit status {}); its log {} ends:\n{}", trial.label(), phase, status,
                          trial.sidecar(".log").string(), last_lines(trial.sidecar(".log"), 5));
            return;
        }
        if (r.phase == Phase::train) {
            r.record["trained"] = true;
            r.record["train_seconds"] = r.record.value("train_seconds", 0.0) + seconds;
            write_trial_record(trial, r.record);
            steps_done_ += trial.steps - r.first_step;
            remaining_steps_ -= trial.steps - r.first_step;
            r.phase = Phase::test;
            launch(r);
            running_.push_back(std::move(r));
            return;
        }
        r.record["test_seconds"] = seconds;
        r.record.erase("failed");
        write_trial_record(trial, r.record);
        ++outcome_.ran;
        spdlog::info("sweep: {} done ({})", trial.label(), metrics_text(trial));
    }

    SweepOutcome stop(int signal) {
        spdlog::warn("sweep: signal {}: stopping {} running trials (each checkpoints first); rerun the command to continue",
                     signal, running_.size());
        for (Running& r : running_) r.child->terminate();
        running_.clear();  // each ChildProcess waits for its child
        outcome_.signal = signal;
        return outcome_;
    }

    void report_progress() const {
        std::string text;
        int64_t advanced = steps_done_;
        for (const Running& r : running_) {
            const int64_t step = steps_reached(*r.trial);
            const double seconds = std::chrono::duration<double>(Clock::now() - r.start).count();
            const double rate = static_cast<double>(step - r.first_step) / seconds;
            if (r.phase == Phase::train) advanced += step - r.first_step;
            text += r.phase == Phase::test ? fmt::format("\n  {} testing", r.trial->label())
                                           : fmt::format("\n  {} step {}/{} eta {}", r.trial->label(), step, r.trial->steps,
                                                         format_duration(static_cast<double>(r.trial->steps - step) / rate));
        }
        const double elapsed = std::chrono::duration<double>(Clock::now() - start_).count();
        const double sweep_eta = static_cast<double>(remaining_steps_ - (advanced - steps_done_)) /
                                 (static_cast<double>(advanced) / elapsed);
        spdlog::info("sweep: {} trials waiting, {} running, {} done here; sweep eta {}{}", queue_.size(), running_.size(),
                     outcome_.ran, format_duration(sweep_eta), text);
    }

    // Rank 0 aggregates: it waits until every trial has its result (or failed).
    void wait_for_other_ranks() const {
        if (world_.size() == 1) return;
        for (bool reported = false;;) {
            int64_t open = 0;
            for (const Trial& trial : trials_) {
                open += !fs::exists(trial.dir / kResultFile) && !read_trial_record(trial).contains("failed");
            }
            if (open == 0) return;
            if (!reported) spdlog::info("sweep: waiting for {} trials of the other ranks", open);
            reported = true;
            std::this_thread::sleep_for(std::chrono::seconds(2));
        }
    }

    static std::string metrics_text(const Trial& trial) {
        std::string text;
        const auto result = read_run_result(trial.dir);
        if (!result) return text;
        for (const auto& [name, value] : result->at("metrics").items()) {
            if (!value.is_number()) continue;
            if (!text.empty()) text += ", ";
            text += fmt::format("{} {:.4g}", name, portable(value.get<double>()));
        }
        return text;
    }

    static std::string last_lines(const fs::path& log, size_t count) {
        const auto lines = read_lines(log.string(), "trial log");
        std::string text;
        for (size_t i = lines.size() > count ? lines.size() - count : 0; i < lines.size(); ++i) text += "  " + lines[i] + "\n";
        return text;
    }

    const SweepOptions& o_;
    const distributed::Communicator& world_;
    std::vector<Trial> trials_;
    int threads_ = 1;
    std::deque<const Trial*> queue_;
    std::vector<Running> running_;
    SweepOutcome outcome_;
    int64_t steps_done_ = 0, remaining_steps_ = 0;
    Clock::time_point start_ = Clock::now();
};

}  // namespace

SweepOutcome run_sweep(const SweepOptions& options, distributed::Communicator& world) {
    HNAS_CHECK(options.parallel >= 1, "sweep: --parallel must be at least 1, got ", options.parallel);
    HNAS_CHECK(!options.settings.empty(), "sweep: no settings");
    // Everything is checked before the sweep's folder is written.
    SweepRunner runner(options, world, plan_trials(options));
    std::optional<Prediction> prediction;
    if (!options.prediction_file.empty()) prediction = read_committed_prediction(options.prediction_file);
    write_or_check_record(options, prediction, world);
    SweepOutcome outcome = runner.run();
    const bool any_result = std::any_of(options.settings.begin(), options.settings.end(), [&](const Setting& setting) {
        const fs::path folder = fs::path(options.out) / setting.name;
        if (!fs::is_directory(folder)) return false;
        for (const auto& entry : fs::directory_iterator(folder)) {
            if (fs::exists(entry.path() / kResultFile)) return true;
        }
        return false;
    });
    if (world.rank() == 0 && outcome.signal == 0 && any_result) {
        const Comparison comparison = compare(collect_results({options.out}));
        write_comparison(comparison, options.out);
        fmt::print("{}", comparison.markdown);
    }
    return outcome;
}

namespace {

RunPath run_path(const fs::path& dir) {
    const std::string folder = dir.filename().string();
    if (folder.starts_with("seed-")) return {dir, dir.parent_path().filename().string(), folder};
    return {dir, folder, ""};
}

}  // namespace

std::vector<RunPath> find_runs(const std::string& path, const std::string& marker, const char* command) {
    HNAS_CHECK(fs::is_directory(path), command, ": ", path, " is not a folder");
    const fs::path root(path);
    if (fs::exists(root / marker)) return {run_path(root)};
    std::vector<RunPath> runs;
    if (fs::exists(root / kSweepFile)) {
        const std::string record = (root / kSweepFile).string();
        const Json sweep = parse_json(read_file(record, "sweep record"), "sweep record " + record + ":");
        const std::string where = std::string(command) + ": sweep record " + record;
        const auto list = [&](const char* key) -> const Json& {
            HNAS_CHECK(sweep.is_object() && sweep.contains(key) && sweep.at(key).is_array(), where, ": \"", key,
                       "\" must be an array");
            return sweep.at(key);
        };
        for (const Json& setting : list("settings")) {
            HNAS_CHECK(setting.is_object() && setting.contains("name") && setting.at("name").is_string(), where,
                       ": each setting must be an object with a \"name\" string");
            // The name becomes a folder below the sweep's: nothing that leaves it or names no folder.
            const std::string name = setting.at("name").get<std::string>();
            const bool folder_name = !name.empty() && name != "." && name != ".." && name.find('/') == std::string::npos &&
                                     name.find('\0') == std::string::npos;
            HNAS_CHECK(folder_name, where, ": the setting name ", setting.at("name").dump(),
                       " is not a folder name (empty, \".\", \"..\", or holding '/' or NUL)");
            for (const Json& seed : list("seeds")) {
                const int64_t k = json_integer(seed, std::numeric_limits<int64_t>::min(), std::numeric_limits<int64_t>::max(),
                                               where + ": a seed");
                runs.push_back(run_path(root / name / ("seed-" + std::to_string(k))));
            }
        }
        return runs;
    }
    std::vector<fs::path> found;
    for (const auto& entry : fs::recursive_directory_iterator(root)) {
        if (entry.is_regular_file() && entry.path().filename() == marker) found.push_back(entry.path().parent_path());
    }
    std::sort(found.begin(), found.end());
    for (const fs::path& dir : found) runs.push_back(run_path(dir));
    return runs;
}

}  // namespace hnas::experiments
