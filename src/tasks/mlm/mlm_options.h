// The masked-LM task's own config keys: the text sources, the sequence length, the masking, and the
// weight of the sentence-order loss.
#pragma once

#include <vector>

#include "config/experiment_config.h"
#include "data/mlm.h"

namespace hnas::tasks::mlm {

struct MlmOptions : config::TaskOptionsOf<MlmOptions> {
    std::vector<data::TextSource> train_sources{{"data/corpus/moby_dick.txt", data::DocumentUnit::block}}, valid_sources;
    std::vector<data::TextSource> test_sources;  // what `hnas test` scores; empty: valid_sources
    std::string prepared;
    int64_t shuffle_sentences = data::MlmDataOptions{}.shuffle_sentences;
    int64_t shuffle_regions = data::MlmDataOptions{}.shuffle_regions;
    int64_t max_seq = 128;
    data::Packing packing = data::Packing::document;
    data::MaskingOptions masking;
    // The weight of ALBERT's sentence-order loss beside the masked-LM loss; 0: no SOP head.
    float sentence_order_weight = 1.0f;
};

const config::TaskSchema& schema();
// An mlm config's options; an Error for a config of another task.
const MlmOptions& options(const config::ExperimentConfig& config);

}  // namespace hnas::tasks::mlm
