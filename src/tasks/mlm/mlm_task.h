// Masked-LM pretraining of a BERT-style encoder (paper 004's "masked-LM & sentence-ordering"): ALBERT's
// n-gram masking and, with train.sentence_order_weight > 0, its sentence-order prediction on the pooled
// [CLS]. Validation reports the loss, the masked-token accuracy and the sentence-order accuracy.
#pragma once

#include "tasks/task.h"

namespace hnas::tasks::mlm {

const TaskDefinition& definition();

}  // namespace hnas::tasks::mlm
