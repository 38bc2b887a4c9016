// What the config layer knows of a task: its name and the hooks through which it reads and fills its own
// part of a config. The config parser reads the keys every task shares; each task's schema, defined in
// its folder (src/tasks/<name>/<name>_options.cpp), reads the rest into an options object of the task's
// own type. The task layer hands the parser the list of schemas (tasks::schemas()), as the attention
// kinds' registry names the kinds.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "base/config_node.h"

namespace hnas::config {

struct ExperimentConfig;

// A task's own options: a type the task defines in its folder, which the config holds and copies.
class TaskOptions {
public:
    virtual ~TaskOptions() = default;
    virtual std::unique_ptr<TaskOptions> clone() const = 0;
};

template <typename Derived>
class TaskOptionsOf : public TaskOptions {
public:
    std::unique_ptr<TaskOptions> clone() const override { return std::make_unique<Derived>(static_cast<const Derived&>(*this)); }
};

// The config's task options with value semantics: a copy of a config copies them.
class TaskOptionsHolder {
public:
    TaskOptionsHolder() = default;
    explicit TaskOptionsHolder(std::unique_ptr<TaskOptions> options) : options_(std::move(options)) {}
    TaskOptionsHolder(const TaskOptionsHolder& other) : options_(other.options_ ? other.options_->clone() : nullptr) {}
    TaskOptionsHolder& operator=(const TaskOptionsHolder& other) {
        options_ = other.options_ ? other.options_->clone() : nullptr;
        return *this;
    }
    TaskOptionsHolder(TaskOptionsHolder&&) noexcept = default;
    TaskOptionsHolder& operator=(TaskOptionsHolder&&) noexcept = default;

    TaskOptions* get() const { return options_.get(); }

private:
    std::unique_ptr<TaskOptions> options_;
};

// The sections of a config from which a task reads its own keys, after the shared ones.
struct TaskSections {
    ConfigNode& data;
    ConfigNode& train;
    ConfigNode& validation;
    ConfigNode& test;
};

// A minimal config of a task with some optional part switched on, whose keys the key tables then list
// (a classification config with `regression`); `label` names it in the tables' cells.
struct KeyTableVariant {
    std::string label;
    Json raw;
};

struct TaskSchema {
    const char* name;         // as configs name it in "task"
    const char* description;  // one phrase, for the `task` key's meaning
    // The task's defaults: its model (architecture and the sizes its papers use), training, and a
    // default-constructed options object of its own type.
    void (*defaults)(ExperimentConfig& config);
    // Reads the task's own keys of each section into its options, then sets what follows from them
    // in the model (heads, outputs, positions).
    void (*parse)(TaskSections& sections, ExperimentConfig& config);
    // The metrics its validation reports that `validation.metric` may name, the default first.
    std::vector<std::string> (*metrics)(const ExperimentConfig& config);
    // The configs whose keys the key tables list ("task" is added); null: the empty config alone.
    std::vector<KeyTableVariant> (*key_table_variants)();
};

// Every task's schema, in the order the key tables list them.
using TaskSchemas = std::vector<const TaskSchema*>;

}  // namespace hnas::config
