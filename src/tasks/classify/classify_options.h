// The classification task's own config keys: the labelled TSV files and their columns, the labels (or
// one regression target), the sequence length, paper 003's same-class templates, and the test file.
#pragma once

#include <string>
#include <vector>

#include "config/experiment_config.h"
#include "data/glue.h"
#include "tasks/task_options.h"

namespace hnas::tasks::classify {

struct ClassifyOptions : config::TaskOptionsOf<ClassifyOptions> {
    LabelledFiles files;
    int64_t max_seq = 128;
    // 0-based columns (text_b_column -1: single texts) and whether the first line names them
    int64_t text_a_column = 0, text_b_column = -1, label_column = 1;
    bool header = true;
    // the label names in id order (empty: collected from the training file in order of first
    // appearance), or one regression target
    std::vector<std::string> labels;
    bool regression = false;
    // paper 003 §9: the probability that a training example's template-comparing layers (kind ot) also
    // see the templates of a random other training example of its class; 0: never
    double same_class_templates = 0.0;
    std::string test_file;

    data::TsvLayout layout() const { return {text_a_column, text_b_column, label_column, header}; }
};

const config::TaskSchema& schema();
// A classify config's options; an Error for a config of another task.
const ClassifyOptions& options(const config::ExperimentConfig& config);
// The classification head follows the labels, which the training file may give only after parsing.
void set_heads(config::ExperimentConfig& config);

}  // namespace hnas::tasks::classify
