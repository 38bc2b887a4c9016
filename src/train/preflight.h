// What `hnas train` checks and sets before a run writes anything, so that a start that fails leaves
// nothing behind: the data files (damaged lines, training files without text), whether the model and
// its largest batch fit in the memory this host has, and the threads the run computes on.
#pragma once

#include <string>
#include <vector>

#include "config/experiment_config.h"
#include "distributed/communicator.h"
#include "tasks/task.h"

namespace hnas::train {

// One pass over every data file: damaged lines (an error, or counted under data.damaged_lines "skip")
// and training files without text are found before the run writes anything.
void check_data_files(const std::vector<tasks::DataFile>& files, const config::ExperimentConfig& config);

// The config keys that size a training step's memory, for the errors that say it does not fit.
std::string memory_keys(const tasks::TaskDefinition& task);

// Refuses a model and batch that cannot fit beside the other ranks on this host, before building it.
void check_memory(const tasks::TaskDefinition& task, const config::ExperimentConfig& config, int64_t vocab_size, int local_ranks);

// What the config lets an optimizer hold still: under You et al.'s LAMB (train.optimizer lamb) the trust
// ratio ‖w‖/‖update‖ scales each tensor's step, and hnas's gate θ = logit(u₀) starts near 0 when u₀ is
// near 0.5, where the ratio keeps it (a 3,000-step pretraining at u₀ 0.5 ended with u 0.5000 in every
// head). One warning per such stack; ALBERT's LAMB (lamb_albert, paper 004's) leaves the gates out.
std::vector<std::string> trust_ratio_warnings(const config::ExperimentConfig& config);

// Under data parallelism each rank gets its share of the cores; otherwise train.threads, if set. Also
// the matmuls' precision.
void configure_threads(const config::ExperimentConfig& config, const distributed::Communicator& world);

// A failed allocation in training step `step`, as the error that ends the run: what failed, what the
// process holds, the config keys that size a step, and where the run resumes from.
Error out_of_memory(int64_t step, const std::string& what, const tasks::TaskDefinition& task, const std::string& checkpoint_dir);

// "1.50 GiB".
std::string gibibytes(int64_t bytes);

}  // namespace hnas::train
