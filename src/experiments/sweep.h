// `hnas sweep`: one base config trained over settings × seeds, each trial an ordinary run
// directory OUT/<setting>/seed-<k>/ that `hnas test` then scores (result.json). Trials run as child
// processes of this one (`hnas train`, then `hnas test`), `parallel` at a time with the cores split
// between them; their output goes to OUT/<setting>/seed-<k>.log. Rerunning the command skips finished
// trials (those with a result.json) and resumes interrupted ones from their checkpoints. Under mpirun
// the ranks share the trials out (trial i to rank i mod ranks); rank 0 waits for them all and writes
// the comparison (compare.h).
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include "distributed/communicator.h"
#include "experiments/grid.h"

namespace hnas::experiments {

inline constexpr const char* kSweepFile = "sweep.json";

struct SweepOptions {
    std::string config;                  // the base config
    std::vector<std::string> overrides;  // --set for every trial
    std::vector<Setting> settings;
    // Trials per setting, with seeds first_seed, first_seed + 1, ...: 6 by default, the fewest with which
    // the exact paired permutation test over seeds can reach p < 0.05 (its floor is 2/2^n).
    int64_t seeds = 6;
    int64_t first_seed = 1;
    std::string out;
    int parallel = 1;                    // trials at once on each rank
    std::string executable;              // the hnas that trains and tests the trials
    double progress_seconds = 30.0;      // between progress reports
    // A markdown file committed to git saying what the sweep is expected to show (prediction.h), stated
    // before its first run and kept in sweep.json (the report opens with it); "": none stated. A rerun
    // may leave it out but cannot change it.
    std::string prediction_file;
};

struct SweepOutcome {
    int64_t trials = 0;   // in the whole sweep
    int64_t ran = 0;      // trained or tested by this process
    int64_t failed = 0;   // of those, ended with an error (see their logs)
    int signal = 0;       // SIGINT or SIGTERM stopped the sweep (its trials checkpointed)
};

SweepOutcome run_sweep(const SweepOptions& options, distributed::Communicator& world);

// A run that hnas compare and hnas report read: its folder, its setting (the name of the folder above
// a folder named seed-<k>, else its own name) and that seed folder's name ("" otherwise).
struct RunPath {
    std::filesystem::path dir;
    std::string setting, seed_folder;
};
// The runs of `path`: the path itself when it holds `marker` (a file of every such run), a sweep's
// trials in its order (sweep.json; whether they hold the marker yet or not), or every folder below it
// holding `marker`, sorted. `command` names the caller in the error for a path that is not a folder.
std::vector<RunPath> find_runs(const std::string& path, const std::string& marker, const char* command);

}  // namespace hnas::experiments
