// Paper 002's synthetic tasks' own config keys: the problem, its alphabet and lengths, where the output
// is read, the validation batches, and the test batches.
#pragma once

#include "config/experiment_config.h"
#include "data/synthetic.h"

namespace hnas::tasks::synthetic {

struct SyntheticOptions : config::TaskOptionsOf<SyntheticOptions> {
    // the problem, its alphabet and lengths, where the output is read, and the validation batches
    // (drawn once, from a stream independent of the run's seed)
    data::SyntheticProblem problem = data::SyntheticProblem::case_distinction;
    int64_t symbols = 100, length = 128, valid_length = 64, valid_batches = 32;
    data::SyntheticOutput output = data::SyntheticOutput::every_position;
    int64_t test_batches = 100;  // from a test stream of their own, at valid_length
};

const config::TaskSchema& schema();
// A synthetic config's options; an Error for a config of another task.
const SyntheticOptions& options(const config::ExperimentConfig& config);

}  // namespace hnas::tasks::synthetic
