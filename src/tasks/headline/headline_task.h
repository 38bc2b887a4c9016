// Headline generation (paper 000's Gigaword task): an encoder-decoder trained with teacher forcing and
// label smoothing on article → headline pairs; validation adds ROUGE-L F1 of greedy headlines.
#pragma once

#include "tasks/task.h"

namespace hnas::tasks::headline {

const TaskDefinition& definition();

}  // namespace hnas::tasks::headline
