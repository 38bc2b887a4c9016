// Paper 002's synthetic tasks (§5): case distinction, with the answer read at every position (§5.1) or
// from the first (§5.2), and mode finding (§5.3), on fresh random symbol sequences every batch
// (src/data/synthetic.h) and a SymbolEncoder of any block, mixer and attention kind. Validation and
// `hnas test` measure accuracy at data.valid_length (the paper's generalization to other lengths),
// per case of case distinction, and at the training length; their examples come from streams of their
// own, the same for every run and seed, so that settings are compared on the same examples.
#pragma once

#include "tasks/task.h"

namespace hnas::tasks::synthetic {

const TaskDefinition& definition();

}  // namespace hnas::tasks::synthetic
