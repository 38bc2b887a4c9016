// The trainer behind `hnas train`: one loop for every task (src/tasks/: headline generation, masked-LM
// pretraining, ...), driven by an ExperimentConfig. Its parts: the run directory (run_directory.h), the
// state a checkpoint carries (train_state.h), metrics.jsonl (metrics_log.h) and the decisions of when to
// log, validate, checkpoint and stop (train_schedule.h). The run directory holds:
//   config.json           the resolved config of the first start
//   tokenizer.model, .vocab   the SentencePiece model, when the run trained it
//   metrics.jsonl         one JSON object per progress line and per validation (losses, rates,
//                         throughput, memory, and what the run's observers add: train/observer.h)
//   checkpoints/step-NNNNNNNN.ckpt   the last `checkpoint.keep` step checkpoints that load
//   checkpoints/*.damaged step checkpoints that did not load when a run resumed, set aside
//   best.ckpt             the checkpoint with the best validation metric so far
// Before the first file is written, the data files are read through once (damaged lines, training
// files without text), the memory the model and a batch need is estimated against what the machine
// has, and a tokenizer trained from the data is trained in a temporary folder: a start that fails
// leaves no run directory behind.
// A resumed run restores parameters, optimizer moments, step, schedule, dropout RNG, data position and
// the early-stopping state, so its per-step losses are bit-identical to an uninterrupted run's.
//
// Data-parallel (docs/distributed.md): given a communicator of N ranks, every rank reads the same
// global batches and trains on its slice of their rows; gradients are summed over the ranks and every
// rank takes the same optimizer step. Rank 0 alone logs, validates and writes the run directory.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "config/experiment_config.h"
#include "distributed/communicator.h"
#include "train/observer.h"
#include "train/train_schedule.h"

namespace hnas::train {

struct TrainOptions {
    std::string run_dir;
    bool resume = false;           // continue from the newest loadable checkpoint in run_dir
    bool reset_optimizer = false;  // with resume: fresh optimizer moments
    bool reset_schedule = false;   // with resume: the schedule starts over at the resumed step
    int64_t stop_after_steps = 0;  // > 0: checkpoint and stop after this many steps of this call
    distributed::Communicator* communicator = nullptr;  // the ranks to train with; null: this process alone
    std::vector<TrainingObserver*> observers;  // called on rank 0 (train/observer.h)
};

struct TrainResult {
    int64_t steps = 0;                   // the step reached
    double last_loss = 0.0;              // training loss of the last step
    std::optional<double> best_metric;   // best validation metric, when validation ran
    StopReason stopped_because = StopReason::completed;
    int signal = 0;                      // with StopReason::signal: its number (0: another rank received it)
};

TrainResult train(const config::ExperimentConfig& config, const TrainOptions& options);

}  // namespace hnas::train
