#include "train/preflight.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <thread>

#include "backend/matmul.h"
#include "base/system_memory.h"
#include "distributed/communicator.h"
#include "base/text_io.h"
#include "models/memory_estimate.h"

namespace hnas::train {

std::vector<std::string> trust_ratio_warnings(const config::ExperimentConfig& config) {
    std::vector<std::string> warnings;
    if (config.train.optimizer.kind != optim::OptimizerKind::lamb) return warnings;
    const models::ModelConfig& m = config.model;
    const std::pair<const char*, const models::AttentionStackConfig*> stacks[] = {
        {"encoder", &m.encoder_attention}, {"decoder", &m.decoder_attention}, {"cross", &m.cross_attention}};
    for (const auto& [name, stack] : stacks) {
        for (const auto& [kind, settings] : stack->kind_settings) {
            if (std::find(stack->kinds.begin(), stack->kinds.end(), kind) == stack->kinds.end()) continue;
            const auto warning = settings->trust_ratio_warning(fmt::format("model.attention.{}", name));
            if (warning) warnings.push_back(*warning);
        }
    }
    return warnings;
}

void check_data_files(const std::vector<tasks::DataFile>& files, const config::ExperimentConfig& config) {
    for (const tasks::DataFile& file : files) {
        TextFileScan scan;
        try {
            scan = scan_text_file(file.path, config.data.damaged_lines);
        } catch (const Error& e) {
            throw Error(file.key + ": " + e.what());
        }
        if (scan.damaged_lines > 0) {
            spdlog::warn("{}: leaving out {} damaged line(s) of {} (the first is line {})", file.key, scan.damaged_lines,
                         file.path, scan.first_damaged_line);
        }
        HNAS_CHECK(!file.training || scan.text_lines > 0, file.key, ": ", file.path, " holds no text (",
                   scan.lines, " line(s), all blank", scan.damaged_lines > 0 ? " or damaged" : "", ")");
    }
}

std::string gibibytes(int64_t bytes) { return fmt::format("{:.2f} GiB", static_cast<double>(bytes) / (1 << 30)); }

std::string memory_keys(const tasks::TaskDefinition& task) {
    return fmt::format("model.d_model, model.ffn_dim, model.heads, model.encoder_layers{}, the vocabulary (tokenizer.vocab_size "
                       "or model.vocab_size), data.batch_sentences, data.batch_tokens and {}",
                       task.memory_model_keys, task.memory_data_keys);
}

void check_memory(const tasks::TaskDefinition& task, const config::ExperimentConfig& config, int64_t vocab_size,
                  int local_ranks) {
    models::ModelConfig model = config.model;
    model.vocab_size = vocab_size;
    const models::BatchShape batch = task.largest_batch(config);
    const models::MemoryEstimate estimate = models::estimate_training_memory(model, batch);
    const AvailableMemory available = available_memory();
    const int64_t needed = estimate.total_bytes() * local_ranks;
    spdlog::info("memory estimate: {} ({} parameters with gradients and optimizer moments: {}; activations of a batch "
                 "of {} x {} tokens: {}){}; {} available ({})",
                 gibibytes(needed), estimate.parameters, gibibytes(estimate.parameter_bytes), batch.rows,
                 batch.source_length, gibibytes(estimate.activation_bytes),
                 local_ranks > 1 ? fmt::format(" times {} ranks on this host", local_ranks) : std::string(),
                 gibibytes(available.bytes), available.source);
    // Measured peaks on the bundled configs ran 1.05-2.1x the estimate (docs: README, "When something
    // goes wrong"): the allocator's pool and the backward pass's gradients come on top.
    if (needed <= available.bytes) {
        if (2 * needed > available.bytes) spdlog::warn("memory: the peak may exceed what is available (peaks reach twice the estimate)");
        return;
    }
    throw Error(fmt::format(
        "train: this model and batch need about {} ({} parameters with gradients and optimizer moments: {}; "
        "activations of a batch of {} rows x {} tokens: {}){}, but {} is available ({}); the size is driven by {}",
        gibibytes(needed), estimate.parameters, gibibytes(estimate.parameter_bytes), batch.rows, batch.source_length,
        gibibytes(estimate.activation_bytes),
        local_ranks > 1 ? fmt::format(" for each of {} ranks on this host", local_ranks) : std::string(),
        gibibytes(available.bytes), available.source, memory_keys(task)));
}

void configure_threads(const config::ExperimentConfig& config, const distributed::Communicator& world) {
    if (world.size() > 1) {
        // An explicit OMP_NUM_THREADS counts as a request, like train.threads.
        const int requested = config.train.threads > 0                 ? config.train.threads
                              : std::getenv("OMP_NUM_THREADS") != nullptr ? backend::num_threads()
                                                                          : 0;
        backend::set_num_threads(distributed::threads_per_rank(requested, world.local_size()));
        spdlog::info("data-parallel over {} ranks ({} on this host of {} cores): {} OpenMP thread(s) per rank{}",
                     world.size(), world.local_size(), std::thread::hardware_concurrency(), backend::num_threads(),
                     requested > backend::num_threads() ? fmt::format(" (not the {} requested: the cores would be oversubscribed)", requested)
                                                        : std::string());
    } else if (config.train.threads > 0) {
        backend::set_num_threads(config.train.threads);
    }
    backend::set_matmul_precision(config.train.precision);
}

Error out_of_memory(int64_t step, const std::string& what, const tasks::TaskDefinition& task, const std::string& checkpoint_dir) {
    return Error(fmt::format("train: step {}: out of memory: {} (process RSS {}); the size is driven by {}. The last "
                             "checkpoint in {} resumes the run.",
                             step, what, gibibytes(process_memory().rss), memory_keys(task), checkpoint_dir));
}

}  // namespace hnas::train
