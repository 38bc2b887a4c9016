// The records a training run writes to metrics.jsonl beside its losses, and what it logs on resume:
// where the memory is, what the process has spent in matrix products, the papers' attention
// diagnostics on a fixed validation batch, every hybrid weight u; why it stopped, and how the config
// changed.
#pragma once

#include "base/json.h"
#include "models/model.h"
#include "train/train_schedule.h"

namespace hnas::train {

// Bytes at a progress line or a validation: the peak of bytes in live tensors since the previous such
// record (then reset) and now, the tensor pool's segments, malloc's heap in use and kept free, and the
// process's resident memory now and at its peak.
Json memory_record();

// What the process has spent since it started: fresh pages mapped in, and the matmuls' calls, FLOPs
// and seconds with the primitives their shapes needed and the seconds creating them took.
Json profile_record();

// Per bidirectional attention and head on `forward`'s batch: the smallest per-key weight sum
// min_j Σ_i A_ij (paper 000 Fig. 1), its ratio to Lemma 1's bound 1/L, the share of keys below ε,
// the histogram of ln Σ_i A_ij down to e^-40 (paper 004 Fig. 1); per attention, the share of keys
// below ε in every head (lost to its output); and each hnas layer's mean u.
Json attention_diagnostics(models::Model& model, const models::DiagnosticForward& forward);

// Every hybrid weight u per layer and head (hnas attention), for paper 000's Fig. 3 over training.
Json hybrid_u_record(models::Model& model);

// Logs why a run stopped before its last step (nothing when it completed).
void log_stop(StopReason reason, int64_t patience, int64_t stop_after_steps);

// Logs each config option a resumed run changed, added or dropped against the checkpoint's.
void log_config_differences(const Json& saved, const Json& current);

}  // namespace hnas::train
