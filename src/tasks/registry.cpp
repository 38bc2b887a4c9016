#include "tasks/classify/classify_task.h"
#include "tasks/headline/headline_task.h"
#include "tasks/images/images_task.h"
#include "tasks/mlm/mlm_task.h"
#include "tasks/multiview/multiview_task.h"
#include "tasks/span/span_task.h"
#include "tasks/synthetic/synthetic_task.h"

namespace hnas::tasks {

namespace {

// Every task, one line each; the first is a config's default task.
const std::vector<const TaskDefinition*>& definitions() {
    static const std::vector<const TaskDefinition*> all{
        &headline::definition(), &mlm::definition(),       &classify::definition(), &span::definition(),
        &synthetic::definition(), &multiview::definition(), &images::definition(),
    };
    return all;
}

}  // namespace

const TaskDefinition& task_definition(const config::TaskSchema& schema) {
    for (const TaskDefinition* definition : definitions()) {
        if (definition->schema == &schema) return *definition;
    }
    throw Error(std::string("tasks: no definition for task ") + schema.name);
}

const config::TaskSchemas& schemas() {
    static const config::TaskSchemas all = [] {
        config::TaskSchemas list;
        for (const TaskDefinition* definition : definitions()) list.push_back(definition->schema);
        return list;
    }();
    return all;
}

config::ExperimentConfig parse_config(const Json& raw, config::KeyLog* log) { return config::parse_experiment_config(raw, schemas(), log); }

config::ExperimentConfig load_config(const std::string& path, const std::vector<std::string>& overrides) {
    return config::load_experiment_config(path, schemas(), overrides);
}

std::string key_tables() { return config::key_tables(schemas()); }

std::string with_key_tables(const std::string& document, const std::string& path) {
    return config::with_key_tables(document, path, schemas());
}

}  // namespace hnas::tasks
