// The files of one training run on disk (the layout is in trainer.h). Every file is written
// atomically (write_file_atomically), and the step checkpoints rotate so that a damaged file can
// never cost a good one:
//   - resuming loads the newest step checkpoint that loads and sets every newer one aside as
//     "<name>.damaged", so it is neither tried again nor counted;
//   - a new step checkpoint is read back and verified before anything is deleted;
//   - rotation keeps the `keep` newest checkpoints known to load (the one the run resumed from and
//     those it wrote); once there are that many, it deletes the step checkpoints older than all of them.
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "io/checkpoint.h"

namespace hnas::train {

class RunDirectory {
public:
    explicit RunDirectory(std::filesystem::path root);

    const std::filesystem::path& root() const { return root_; }
    std::filesystem::path checkpoint_dir() const { return root_ / "checkpoints"; }
    // The step checkpoint files ("checkpoints/step-NNNNNNNN.ckpt"), oldest first.
    std::vector<std::filesystem::path> step_checkpoints() const;

    // Creates the folders and removes temporary files left by interrupted writes.
    void create();
    // The newest step checkpoint that loads; newer damaged ones are set aside. Throws when none loads.
    io::Checkpoint load_newest_checkpoint();
    // Writes `name` (relative to the root) atomically.
    void write_file(const std::string& name, std::string_view contents) const;
    // Writes, verifies and rotates (see above); returns the new checkpoint's path.
    std::filesystem::path write_step_checkpoint(int64_t step, const io::CheckpointWriter& writer, int64_t keep);
    void write_best_checkpoint(const io::CheckpointWriter& writer) const;

private:
    void set_aside(const std::filesystem::path& damaged, const std::string& reason) const;
    void rotate(int64_t keep);

    std::filesystem::path root_;
    std::vector<std::filesystem::path> verified_;  // step checkpoints known to load, oldest first
};

}  // namespace hnas::train
