// Masked-LM pretraining of a BERT-style encoder (paper 004's "masked-LM & sentence-ordering"): ALBERT's
// n-gram masking and, with train.sentence_order_weight > 0, its sentence-order prediction on the pooled
// [CLS]. Validation reports the loss, the masked-token accuracy and the sentence-order accuracy.
#pragma once

#include "data/mlm.h"
#include "tasks/task.h"

namespace hnas::tasks::mlm {

const TaskDefinition& definition();

enum class DataRole { train, validation };
// The masked-LM pipeline's options for a config's training or validation text. Validation sequences
// hold one document each and are masked with data::MaskingOptions' defaults, whatever the config says,
// so that validation accuracy compares across pretraining recipes.
data::MlmDataOptions data_options(const config::ExperimentConfig& config, DataRole role);

}  // namespace hnas::tasks::mlm
