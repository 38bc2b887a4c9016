// The span-extraction task's own config keys: the SQuAD JSON files, the windows over long contexts, the
// question and answer lengths, SQuAD 2.0's no-answer threshold, and the test file.
#pragma once

#include "config/experiment_config.h"
#include "tasks/task_options.h"

namespace hnas::tasks::span {

struct SpanOptions : config::TaskOptionsOf<SpanOptions> {
    LabelledFiles files;
    int64_t max_seq = 384;
    // windows over long contexts every doc_stride pieces, questions cut to max_query pieces, answers of
    // at most max_answer pieces, SQuAD 2.0's no-answer when null − best span > null_threshold
    int64_t doc_stride = 128, max_query = 64, max_answer = 30;
    double null_threshold = 0.0;
    std::string test_file;
};

const config::TaskSchema& schema();
// A span config's options; an Error for a config of another task.
const SpanOptions& options(const config::ExperimentConfig& config);

}  // namespace hnas::tasks::span
