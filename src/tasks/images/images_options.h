// Paper 003's images task's own config keys: the labelled CSV files, the images' size, the patches'
// side, the pixels' full scale, the classes, the same-class templates, and the test file.
#pragma once

#include "config/experiment_config.h"
#include "tasks/task_options.h"

namespace hnas::tasks::images {

struct ImagesOptions : config::TaskOptionsOf<ImagesOptions> {
    LabelledFiles files;
    // the images' size, the patches' side, the pixels' full scale, and the classes (0: one more than the
    // training file's largest label)
    int64_t image_height = 8, image_width = 8, patch = 2, classes = 0;
    double pixel_max = 16.0;
    double same_class_templates = 0.0;  // as classify's (paper 003 §9)
    std::string test_file;
};

const config::TaskSchema& schema();
// An images config's options; an Error for a config of another task.
const ImagesOptions& options(const config::ExperimentConfig& config);
// The ViT's patches, positions and classes from the options (again once the classes come from the data).
void set_model_output(config::ExperimentConfig& config);

}  // namespace hnas::tasks::images
