// What a training run measures between two progress lines: the steps' mean loss, the tokens the model
// read and the targets the loss averaged over, and (data-parallel) the seconds in backward passes and
// waiting for the gradient sums; with the run's elapsed time and the time it still needs.
#pragma once

#include <chrono>
#include <cstdint>

#include "tasks/task.h"

namespace hnas::train {

class ProgressWindow {
public:
    struct Summary {
        double loss = 0.0;                     // mean over the window's steps
        double input_tokens_per_second = 0.0;  // tokens the model read (as hnas-bench counts)
        double targets_per_second = 0.0;       // what the loss averages over (tokens, masked tokens, examples)
        double elapsed_seconds = 0.0, eta_seconds = 0.0;
        double backward_seconds_per_step = 0.0, gradient_wait_seconds_per_step = 0.0;
    };

    // The run's first step of this start: the clock starts.
    void start(int64_t step);
    void add_batch(const tasks::BatchTokens& tokens);
    void add_backward(double seconds) { backward_ += seconds; }
    void add_gradient_wait(double seconds) { gradient_wait_ += seconds; }
    void add_step(double loss);
    double last_loss() const { return last_loss_; }
    // The window up to `step` of `total_steps`; the next window starts.
    Summary close(int64_t step, int64_t total_steps);

private:
    using Clock = std::chrono::steady_clock;
    Clock::time_point run_start_, window_start_;
    int64_t first_step_ = 0, steps_ = 0, targets_ = 0, input_tokens_ = 0;
    double loss_ = 0.0, backward_ = 0.0, gradient_wait_ = 0.0, last_loss_ = 0.0;
};

}  // namespace hnas::train
