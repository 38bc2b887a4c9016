// What the tasks' own options share: reaching a config's options as its task's type, and the keys more
// than one task reads. Each task's options, their parsing, defaults and metrics live in its folder
// (src/tasks/<name>/<name>_options.h) behind its config::TaskSchema.
#pragma once

#include <string>

#include "base/check.h"
#include "config/experiment_config.h"

namespace hnas::tasks {

// The options of `config`'s task as `schema`'s type; throws naming both tasks when they differ (a
// headline tool given an mlm checkpoint, say).
template <typename Options>
const Options& options_of(const config::ExperimentConfig& config, const config::TaskSchema& schema) {
    HNAS_CHECK(config.task == &schema && config.task_options.get() != nullptr, "a ", config.task ? config.task->name : "(no task)",
               " config has no ", schema.name, " options (this needs a ", schema.name, " run)");
    return static_cast<const Options&>(*config.task_options.get());
}

template <typename Options>
Options& options_of(config::ExperimentConfig& config, const config::TaskSchema& schema) {
    return const_cast<Options&>(options_of<Options>(std::as_const(config), schema));
}

// Installs a default-constructed Options as `config`'s task options (a schema's defaults hook).
template <typename Options>
void install_default_options(config::ExperimentConfig& config) {
    config.task_options = config::TaskOptionsHolder(std::make_unique<Options>());
}

// Labelled data in files (classify, span, images): the training file (required) and the validation file.
struct LabelledFiles {
    std::string train_file, valid_file;
};
// Reads data.train_file and data.valid_file.
LabelledFiles parse_labelled_files(config::ConfigNode& data);
// test.file: the labelled test file (default: data.valid_file).
std::string parse_test_file(config::ConfigNode& test, const LabelledFiles& files);

// test.batches: test batches of a stream of their own (synthetic, multiview).
int64_t parse_test_batches(config::ConfigNode& test, int64_t fallback);

// Paper 003 §9's same-class templates (classify, images).
double parse_same_class_templates(config::ConfigNode& data, double fallback);

}  // namespace hnas::tasks
