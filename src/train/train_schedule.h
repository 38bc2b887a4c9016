// When a run logs, validates, checkpoints and stops: the decisions of the training loop, from the
// config and the command line, in one place.
#pragma once

#include <cstdint>
#include <optional>

#include "config/experiment_config.h"

namespace hnas::train {

enum class StopReason { completed, early_stopping, signal, stop_after };
inline constexpr EnumName<StopReason> kStopReasonNames[]{{StopReason::completed, "completed"},
                                                         {StopReason::early_stopping, "early stopping"},
                                                         {StopReason::signal, "signal"},
                                                         {StopReason::stop_after, "stop-after"}};
constexpr const auto& enum_names(StopReason) { return kStopReasonNames; }

class TrainSchedule {
public:
    // first_step: the step this start of the run begins at; stop_after_steps > 0 ends this start early.
    TrainSchedule(const config::ExperimentConfig& config, int64_t first_step, int64_t stop_after_steps)
        : train_(config.train), validation_(config.validation), checkpoint_(config.checkpoint), first_step_(first_step),
          stop_after_steps_(stop_after_steps) {}

    bool finished(int64_t step) const { return step >= train_.steps; }
    bool log_due(int64_t step) const { return step % train_.log_every == 0 || step == train_.steps; }
    bool validation_due(int64_t step) const { return validation_.every > 0 && step % validation_.every == 0; }
    bool checkpoint_due(int64_t step) const { return step % checkpoint_.every == 0; }

    // After a step: why the run stops there, if it does. Patience first, then --stop-after, then a signal.
    std::optional<StopReason> stop(int64_t step, bool patience_ran_out, bool signalled) const {
        if (patience_ran_out) return StopReason::early_stopping;
        if (stop_after_steps_ > 0 && step - first_step_ >= stop_after_steps_ && !finished(step)) return StopReason::stop_after;
        if (signalled) return StopReason::signal;
        return std::nullopt;
    }
    // At the end: a run that completed validates once more unless it just did; every stop leaves a
    // checkpoint of its last step.
    bool final_validation_due(int64_t step, StopReason reason) const {
        return reason == StopReason::completed && !validation_due(step);
    }
    bool final_checkpoint_due(int64_t step) const { return !checkpoint_due(step); }

private:
    config::TrainConfig train_;
    config::ValidationConfig validation_;
    config::CheckpointConfig checkpoint_;
    int64_t first_step_, stop_after_steps_;
};

}  // namespace hnas::train
