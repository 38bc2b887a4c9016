#include "optim/schedule.h"

#include <algorithm>
#include <cmath>
#include <numbers>

#include "base/check.h"

namespace hnas::optim {

double learning_rate_at(const ScheduleOptions& o, int64_t step) {
    HNAS_CHECK(step >= 1, "schedule: steps count from 1, got ", step);
    if (o.kind == ScheduleKind::constant) return o.learning_rate;
    if (step <= o.warmup_steps) return o.learning_rate * static_cast<double>(step) / static_cast<double>(o.warmup_steps);
    switch (o.kind) {
        case ScheduleKind::linear: {
            const double remaining = static_cast<double>(std::max<int64_t>(o.total_steps - step, 0));
            return o.learning_rate * remaining / static_cast<double>(std::max<int64_t>(o.total_steps - o.warmup_steps, 1));
        }
        case ScheduleKind::inverse_sqrt:
            return o.learning_rate * std::sqrt(static_cast<double>(std::max<int64_t>(o.warmup_steps, 1)) / static_cast<double>(step));
        case ScheduleKind::bert_linear:
            return o.learning_rate * static_cast<double>(std::max<int64_t>(o.total_steps - step, 0)) /
                   static_cast<double>(std::max<int64_t>(o.total_steps, 1));
        case ScheduleKind::cosine: {
            const double progress = std::min(1.0, static_cast<double>(step - o.warmup_steps) /
                                                      static_cast<double>(std::max<int64_t>(o.total_steps - o.warmup_steps, 1)));
            return o.min_learning_rate + 0.5 * (o.learning_rate - o.min_learning_rate) * (1.0 + std::cos(std::numbers::pi * progress));
        }
        case ScheduleKind::constant: break;
    }
    return o.learning_rate;
}

}  // namespace hnas::optim
