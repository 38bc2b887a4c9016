// Fine-tuning a BERT-style encoder on sentence or sentence-pair classification (GLUE's tasks; paper 000
// Table 3, paper 004 Tables 2 and 6): a classification head on the pooled [CLS], cross-entropy over N
// classes, or one regression output with the mean squared error (STS-B). Validation reports GLUE's
// metrics: accuracy, F1 (two classes) and Matthews correlation, or Pearson and Spearman correlation.
#pragma once

#include "tasks/task.h"

namespace hnas::tasks::classify {

const TaskDefinition& definition();

}  // namespace hnas::tasks::classify
