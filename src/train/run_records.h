// The records a training run writes to metrics.jsonl beside its losses, and what it logs on resume:
// where the memory is, what the process has spent in matrix products; why it stopped, and how the
// config changed.
#pragma once

#include "base/json.h"
#include "train/train_schedule.h"

namespace hnas::train {

// Bytes at a progress line or a validation: the peak of bytes in live tensors since the previous such
// record (then reset) and now, the tensor pool's segments, malloc's heap in use and kept free, and the
// process's resident memory now and at its peak.
Json memory_record();

// What the process has spent since it started: fresh pages mapped in, and the matmuls' calls, FLOPs
// and seconds with the primitives their shapes needed and the seconds creating them took.
Json profile_record();

// Logs why a run stopped before its last step (nothing when it completed).
void log_stop(StopReason reason, int64_t patience, int64_t stop_after_steps);

// Logs each config option a resumed run changed, added or dropped against the checkpoint's.
void log_config_differences(const Json& saved, const Json& current);

}  // namespace hnas::train
