#include "train/run_records.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <map>

#include "backend/matmul.h"
#include "base/system_memory.h"
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
            {"matmul_reference_primitives", matmuls.reference_primitives}, {"matmul_creation_seconds", matmuls.creation_seconds}};
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
