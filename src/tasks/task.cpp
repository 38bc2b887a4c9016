#include "tasks/task_support.h"

namespace hnas::tasks {

double Validation::metric(const std::string& name) const {
    std::string known;
    for (const Metric& metric : metrics) {
        if (metric.name == name) return metric.value;
        if (!known.empty()) known.append(", ");
        known.append(metric.name);
    }
    throw Error("validation: no metric \"" + name + "\" (this task reports " + known + ")");
}

Var shard_part(const Var& shard_mean, int64_t shard, int64_t global) {
    if (shard == global) return shard_mean;
    return ops::scale(shard_mean, static_cast<float>(static_cast<double>(shard) / static_cast<double>(global)));
}

std::vector<int32_t> argmax_rows(const Tensor& logits) {
    const int64_t columns = logits.dim(1);
    std::vector<int32_t> classes;
    classes.reserve(static_cast<size_t>(logits.dim(0)));
    for (int64_t r = 0; r < logits.dim(0); ++r) {
        const float* row = logits.data() + r * columns;
        classes.push_back(static_cast<int32_t>(std::max_element(row, row + columns) - row));
    }
    return classes;
}

void check_same_class_templates(const config::ExperimentConfig& config, double probability) {
    const std::vector<std::string>& kinds = config.model.encoder_attention.kinds;
    HNAS_CHECK(probability == 0.0 || std::any_of(kinds.begin(), kinds.end(), [](const std::string& kind) {
                   return nn::find_attention_kind(kind).compares_templates;
               }),
               "config data.same_class_templates: no encoder layer's kind compares templates (`ot`), so no layer would see the "
               "partners' templates");
}

int64_t rows_allowed(const config::DataConfig& data, int64_t length) {
    const int64_t by_tokens = data.batch_tokens > 0 ? data.batch_tokens / length : 0;
    const int64_t rows = data.batch_sentences == 0 ? by_tokens
                         : by_tokens > 0          ? std::min(data.batch_sentences, by_tokens)
                                                  : data.batch_sentences;
    return std::max<int64_t>(1, rows);
}

config::ExperimentConfig completed_config(const config::ExperimentConfig& config) {
    config::ExperimentConfig complete = config;
    if (const auto complete_config = task_definition(*config.task).complete_config) complete_config(complete);
    return complete;
}

std::vector<std::pair<std::string, Tensor>> Task::batch_tensors() const {
    throw Error("task: only the headline and mlm tasks hand out their batches as tensors");
}

}  // namespace hnas::tasks
