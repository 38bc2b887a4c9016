// Image classification with a ViT (paper 003 §9 Table 1, at CPU scale: data/digits/, the 8 × 8
// handwritten digits): cross-entropy over the classes from the class token; paper 003's recipe of
// same-class template sets for an `ot` layer (data.same_class_templates); validation and `hnas test`
// report accuracy, the test per image for paired comparisons.
#pragma once

#include "tasks/task.h"

namespace hnas::tasks::images {

const TaskDefinition& definition();

}  // namespace hnas::tasks::images
