#include "train/progress_window.h"

#include <algorithm>

namespace hnas::train {

void ProgressWindow::start(int64_t step) {
    run_start_ = window_start_ = Clock::now();
    first_step_ = step;
}

void ProgressWindow::add_batch(const tasks::BatchTokens& tokens) {
    targets_ += tokens.global;
    input_tokens_ += tokens.input;
}

void ProgressWindow::add_step(double loss) {
    loss_ += loss;
    ++steps_;
    last_loss_ = loss;
}

ProgressWindow::Summary ProgressWindow::close(int64_t step, int64_t total_steps) {
    const auto now = Clock::now();
    const double elapsed = std::chrono::duration<double>(now - run_start_).count();
    const double window = std::max(std::chrono::duration<double>(now - window_start_).count(), 1e-9);
    const auto steps = static_cast<double>(steps_);
    Summary summary{.loss = loss_ / steps,
                    .input_tokens_per_second = static_cast<double>(input_tokens_) / window,
                    .targets_per_second = static_cast<double>(targets_) / window,
                    .elapsed_seconds = elapsed,
                    .eta_seconds = elapsed / static_cast<double>(step - first_step_) * static_cast<double>(total_steps - step),
                    .backward_seconds_per_step = backward_ / steps,
                    .gradient_wait_seconds_per_step = gradient_wait_ / steps};
    window_start_ = now;
    loss_ = backward_ = gradient_wait_ = 0.0;
    steps_ = targets_ = input_tokens_ = 0;
    return summary;
}

}  // namespace hnas::train
