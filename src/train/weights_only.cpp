#include "train/weights_only.h"

#include <filesystem>

#include "io/checkpoint.h"
#include "optim/optimizer.h"

namespace hnas::train {

WeightsOnlyReport write_weights_only(const std::string& checkpoint_path, const std::string& out) {
    const io::Checkpoint checkpoint = io::Checkpoint::load(checkpoint_path);
    nlohmann::ordered_json metadata = checkpoint.metadata();
    metadata["weights_only_from"] = std::filesystem::path(checkpoint_path).filename().string();
    io::CheckpointWriter writer(metadata);
    WeightsOnlyReport report;
    for (const io::EntryInfo& entry : checkpoint.entries()) {
        if (entry.name.starts_with(optim::kMomentEntryPrefix)) {
            ++report.moments_dropped;
            continue;
        }
        if (entry.type == io::EntryType::bytes) {
            writer.add_bytes(entry.name, checkpoint.bytes(entry.name));
        } else {
            writer.add_tensor(entry.name, checkpoint.tensor(entry.name));
        }
        ++report.entries_kept;
    }
    writer.write(out);
    report.bytes_written = std::filesystem::file_size(out);
    return report;
}

}  // namespace hnas::train
