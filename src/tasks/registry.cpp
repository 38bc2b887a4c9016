#include "tasks/classify/classify_task.h"
#include "tasks/headline/headline_task.h"
#include "tasks/images/images_task.h"
#include "tasks/mlm/mlm_task.h"
#include "tasks/multiview/multiview_task.h"
#include "tasks/span/span_task.h"
#include "tasks/synthetic/synthetic_task.h"

namespace hnas::tasks {

const TaskDefinition& task_definition(config::Task task) {
    static const TaskDefinition* const definitions[] = {
        &headline::definition(),
        &mlm::definition(),
        &classify::definition(),
        &span::definition(),
        &synthetic::definition(),
        &multiview::definition(),
        &images::definition(),
    };
    for (const TaskDefinition* definition : definitions) {
        if (definition->task == task) return *definition;
    }
    throw Error("tasks: no definition for task " + std::string(name_of(task)));
}

}  // namespace hnas::tasks
