// Paper 004's multi-view attention (§6.1, App. B; paper 000 §7.1) on a synthetic stand-in for its three
// object detectors (src/data/multiview.h): a MultiviewModel fuses the primary view's boxes with the two
// secondary views' by one attention of any kind (or pools them: the no-attention baseline) and answers
// the marked object's color and the count of color-0 objects as one class. Validation and `hnas test`
// report the accuracy of the pair and of each part, on streams of their own shared by every run and
// seed; the trainer measures the fusion attentions' per-key weight sums and HNAS's u on a fixed batch.
#pragma once

#include "tasks/task.h"

namespace hnas::tasks::multiview {

const TaskDefinition& definition();

}  // namespace hnas::tasks::multiview
