// Learning-rate schedules, as pure functions of the step (1-based: the rate of the step about to run).
// All but "constant" ramp up linearly over the warm-up steps, then:
//   linear:       decay linearly to 0 at total_steps;
//   inverse_sqrt: lr · √(warmup / step) (Vaswani et al. 2017);
//   cosine:       half a cosine from lr down to min_lr at total_steps;
//   bert_linear:  lr · (total − step) / total, the linear decay counted from step 0 (BERT's
//                 optimization.py, and paper 002's code after it): the rate drops at the end of warm-up.
#pragma once

#include <cstdint>
#include <string>

#include "base/enum_names.h"

namespace hnas::optim {

enum class ScheduleKind { constant, linear, inverse_sqrt, cosine, bert_linear };
inline constexpr EnumName<ScheduleKind> kScheduleKindNames[]{{ScheduleKind::constant, "constant"},
                                                             {ScheduleKind::linear, "linear"},
                                                             {ScheduleKind::inverse_sqrt, "inverse_sqrt"},
                                                             {ScheduleKind::cosine, "cosine"},
                                                             {ScheduleKind::bert_linear, "bert_linear"}};
constexpr const auto& enum_names(ScheduleKind) { return kScheduleKindNames; }

struct ScheduleOptions {
    ScheduleKind kind = ScheduleKind::linear;
    double learning_rate = 1e-3;
    int64_t warmup_steps = 0;
    int64_t total_steps = 0;   // linear and cosine end here
    double min_learning_rate = 0.0;
};

double learning_rate_at(const ScheduleOptions& options, int64_t step);

}  // namespace hnas::optim
