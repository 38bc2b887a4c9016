#include "train/run_records.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <map>

#include "analysis/explain_away.h"
#include "backend/matmul.h"
#include "base/system_memory.h"
#include "tasks/task_support.h"
#include "tensor/tensor.h"
#include "train/signals.h"

namespace hnas::train {

namespace {

// Every leaf of a JSON object as path -> value, for logging config differences on resume.
void flatten(const Json& value, const std::string& path, std::map<std::string, Json>& out) {
    if (value.is_object()) {
        for (const auto& [key, child] : value.items()) flatten(child, path.empty() ? key : path + "." + key, out);
    } else {
        out[path] = value;
    }
}

}  // namespace

Json memory_record() {
    const TensorMemory tensors = tensor_memory();
    reset_tensor_memory_peak();
    const HeapMemory heap = heap_memory();
    const ProcessMemory process = process_memory();
    return {{"tensor_live_peak", tensors.peak_live}, {"tensor_live", tensors.live}, {"tensor_reserved", tensors.reserved}, {"heap_in_use", heap.in_use},
            {"heap_free", heap.free}, {"rss", process.rss}, {"peak_rss", process.peak_rss}};
}

Json profile_record() {
    const backend::MatmulStats matmuls = backend::matmul_stats();
    return {{"minor_faults", process_memory().minor_faults}, {"matmul_calls", matmuls.calls}, {"matmul_flops", matmuls.flops},
            {"matmul_seconds", matmuls.seconds}, {"matmul_primitives", matmuls.primitives},
            {"matmul_creation_seconds", matmuls.creation_seconds}};
}

Json attention_diagnostics(models::Model& model, const models::DiagnosticForward& forward) {
    const tasks::EvaluationMode evaluation(model);
    const analysis::ExplainAwayReport report = analysis::measure_key_weights(model, forward, {});
    Json attentions = Json::object();
    for (const analysis::AttentionKeyWeights& attention : report.attentions) {
        Json entry = {{"kind", attention.kind}};
        for (const analysis::HeadKeyWeights& head : attention.heads) {
            entry["min_sum"].push_back(head.min_sum);
            entry["min_ratio"].push_back(head.min_ratio);
            entry["fraction_below_epsilon"].push_back(static_cast<double>(head.below_epsilon) /
                                                      static_cast<double>(std::max<int64_t>(head.keys, 1)));
            entry["ln_histogram"].push_back(head.histogram);
            entry["below_range"].push_back(head.below_range);
            entry["negative"].push_back(head.negative);
        }
        const int64_t keys = attention.heads.empty() ? 0 : attention.heads.front().keys;
        entry["fraction_below_epsilon_in_every_head"] =
            static_cast<double>(attention.below_epsilon_in_every_head) / static_cast<double>(std::max<int64_t>(keys, 1));
        attentions[attention.name] = std::move(entry);
    }
    Json hybrid_u_mean = Json::object();
    for (const auto& [name, attention] : model.attentions()) {
        for (const auto& values : attention->head_values()) {
            if (values.name != "u" || values.values.empty()) continue;
            double sum = 0.0;
            for (const double u : values.values) sum += u;
            hybrid_u_mean[name] = sum / static_cast<double>(values.values.size());
        }
    }
    return {{"sequences", report.sequences},
            {"epsilon", report.options.epsilon},
            {"ln_low", report.options.ln_low},
            {"ln_high", report.options.ln_high},
            {"attentions", attentions},
            {"hybrid_u_mean", hybrid_u_mean}};
}

Json hybrid_u_record(models::Model& model) {
    Json hybrid_u = Json::object();
    for (const auto& [name, attention] : model.attentions()) {
        for (const auto& values : attention->head_values()) {
            if (values.name == "u") hybrid_u[name] = values.values;
        }
    }
    return hybrid_u;
}

void log_stop(StopReason reason, int64_t patience, int64_t stop_after_steps) {
    switch (reason) {
        case StopReason::completed: return;
        case StopReason::early_stopping:
            spdlog::info("early stopping: no improvement in {} validations", patience);
            return;
        case StopReason::stop_after:
            spdlog::info("stopping after {} steps of this run (--stop-after)", stop_after_steps);
            return;
        case StopReason::signal: {
            const int signal = pending_signal();
            spdlog::warn("{}: writing a checkpoint and stopping",
                         signal != 0 ? fmt::format("received signal {}", signal) : "another rank received a signal");
            return;
        }
    }
}

void log_config_differences(const Json& saved, const Json& current) {
    std::map<std::string, Json> before, after;
    flatten(saved, "", before);
    flatten(current, "", after);
    for (const auto& [path, value] : after) {
        const auto found = before.find(path);
        if (found == before.end()) {
            spdlog::warn("resume: config option {} = {} is new (not in the checkpoint)", path, value.dump());
        } else if (found->second != value) {
            spdlog::warn("resume: config option {} changed from {} to {}", path, found->second.dump(), value.dump());
        }
    }
    for (const auto& [path, value] : before) {
        if (!after.count(path)) spdlog::warn("resume: config option {} = {} was dropped", path, value.dump());
    }
}

}  // namespace hnas::train
