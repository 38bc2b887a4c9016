// Paper 004's multi-view task's own config keys: the scenes (objects, colors, the count's classes), the
// share of objects the primary view detects, the validation batches, and the test batches.
#pragma once

#include "config/experiment_config.h"

namespace hnas::tasks::multiview {

struct MultiviewOptions : config::TaskOptionsOf<MultiviewOptions> {
    // paper 004 §6.1 (data/multiview.h): objects per scene, colors, the count's classes, and the share
    // of objects the primary view detects; validation batches drawn once from their own stream
    int64_t objects_min = 8, objects_max = 32, colors = 4, count_classes = 8, valid_batches = 32;
    double primary_recall = 0.5;
    int64_t test_batches = 100;  // from a test stream of their own
};

const config::TaskSchema& schema();
// A multiview config's options; an Error for a config of another task.
const MultiviewOptions& options(const config::ExperimentConfig& config);

}  // namespace hnas::tasks::multiview
