#include "tasks/task.h"

// Every task, one line each, in the order configs and tables list them; the first is a config's default
// task. Each task's folder defines its tasks::<name>::definition().
#define HNAS_TASKS(TASK) \
    TASK(headline)       \
    TASK(mlm)            \
    TASK(classify)       \
    TASK(span)           \
    TASK(synthetic)      \
    TASK(multiview)      \
    TASK(images)

#define HNAS_DECLARE_TASK(name) \
    namespace hnas::tasks::name { const TaskDefinition& definition(); }
HNAS_TASKS(HNAS_DECLARE_TASK)
#undef HNAS_DECLARE_TASK

namespace hnas::tasks {

namespace {

const std::vector<const TaskDefinition*>& definitions() {
#define HNAS_TASK_ENTRY(name) &name::definition(),
    static const std::vector<const TaskDefinition*> all{HNAS_TASKS(HNAS_TASK_ENTRY)};
#undef HNAS_TASK_ENTRY
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
