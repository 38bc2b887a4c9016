// What a diagnostic sees of a training run. The trainer knows no analysis: the command that starts a run
// registers observers (TrainOptions::observers; src/analysis/training_observers.h has the papers'
// diagnostics), and rank 0 calls them at its start, at each progress line and at each validation, with
// the model and the record it is about to write to metrics.jsonl, to which an observer adds its fields.
#pragma once

#include <cstdint>

#include "base/json.h"
#include "config/experiment_config.h"
#include "data/tokenizer.h"
#include "tasks/task.h"

namespace hnas::train {

// The run as built, before its first step: the config with the vocabulary filled in, the tokenizer and
// the task (its model, its fixed diagnostic inputs).
struct RunStart {
    const config::ExperimentConfig& config;
    const data::Tokenizer& tokenizer;
    tasks::Task& task;
};

class TrainingObserver {
public:
    virtual ~TrainingObserver() = default;
    // Once, after the model is built and restored, before the first step (e.g. to tokenize a fixed batch).
    virtual void start(const RunStart& /*run*/) {}
    // At each progress line, after the trainer's fields: fields to add to `record`.
    virtual void at_progress(models::Model& /*model*/, int64_t /*step*/, Json& /*record*/) {}
    // At each validation, after the trainer's fields: fields to add. The model is in training mode; an
    // observer that needs dropout off turns it off (tasks::EvaluationMode).
    virtual void at_validation(models::Model& /*model*/, int64_t /*step*/, Json& /*record*/) {}
};

}  // namespace hnas::train
