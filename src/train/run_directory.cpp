#include "train/run_directory.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <cctype>
#include <cstdio>

#include "base/atomic_file.h"
#include "base/check.h"

namespace hnas::train {

namespace fs = std::filesystem;

namespace {

// "step-" + 8 digits + ".ckpt", as write_step_checkpoint names them.
bool is_step_checkpoint(const std::string& name) {
    if (name.size() != 18 || name.rfind("step-", 0) != 0 || name.substr(13) != ".ckpt") return false;
    return std::all_of(name.begin() + 5, name.begin() + 13, [](char c) { return std::isdigit(static_cast<unsigned char>(c)) != 0; });
}

std::string step_checkpoint_name(int64_t step) {
    char name[32];
    std::snprintf(name, sizeof name, "step-%08lld.ckpt", static_cast<long long>(step));
    return name;
}

}  // namespace

RunDirectory::RunDirectory(fs::path root) : root_(std::move(root)) {
    HNAS_CHECK(!root_.empty(), "train: no run directory");
}

std::vector<fs::path> RunDirectory::step_checkpoints() const {
    std::vector<fs::path> files;
    if (!fs::is_directory(checkpoint_dir())) return files;
    for (const auto& entry : fs::directory_iterator(checkpoint_dir())) {
        if (is_step_checkpoint(entry.path().filename().string())) files.push_back(entry.path());
    }
    std::sort(files.begin(), files.end());
    return files;
}

void RunDirectory::create() {
    fs::create_directories(checkpoint_dir());
    // An interrupted atomic write leaves its temporary file ("<name>.tmp.<pid>") behind.
    for (const fs::path& directory : {root_, checkpoint_dir()}) {
        for (const auto& entry : fs::directory_iterator(directory)) {
            if (entry.path().filename().string().find(".tmp.") != std::string::npos) {
                spdlog::warn("removing {}, left by an interrupted write", entry.path().string());
                fs::remove(entry.path());
            }
        }
    }
}

io::Checkpoint RunDirectory::load_newest_checkpoint() {
    const auto files = step_checkpoints();
    for (auto it = files.rbegin(); it != files.rend(); ++it) {
        try {
            io::Checkpoint checkpoint = io::Checkpoint::load(it->string());
            verified_ = {*it};
            return checkpoint;
        } catch (const Error& e) {
            set_aside(*it, e.what());
        }
    }
    throw Error("train --resume: no loadable checkpoint in " + checkpoint_dir().string());
}

void RunDirectory::set_aside(const fs::path& damaged, const std::string& reason) const {
    fs::path aside = damaged.string() + ".damaged";
    for (int copy = 2; fs::exists(aside); ++copy) aside = damaged.string() + ".damaged-" + std::to_string(copy);
    fs::rename(damaged, aside);
    spdlog::error("checkpoint {} does not load, set aside as {}: {}", damaged.string(), aside.filename().string(), reason);
}

void RunDirectory::write_file(const std::string& name, std::string_view contents) const {
    write_file_atomically((root_ / name).string(), contents);
}

fs::path RunDirectory::write_step_checkpoint(int64_t step, const io::CheckpointWriter& writer, int64_t keep) {
    const fs::path path = checkpoint_dir() / step_checkpoint_name(step);
    writer.write(path.string());
    try {
        io::verify_checkpoint(path.string());
    } catch (const Error& e) {
        set_aside(path, e.what());
        throw Error(concat_message("step ", step, ": the checkpoint just written does not load back (", e.what(),
                                   "); no older checkpoint was deleted"));
    }
    verified_.erase(std::remove(verified_.begin(), verified_.end(), path), verified_.end());
    verified_.push_back(path);
    rotate(keep);
    return path;
}

void RunDirectory::write_best_checkpoint(const io::CheckpointWriter& writer) const {
    writer.write((root_ / "best.ckpt").string());
}

void RunDirectory::rotate(int64_t keep) {
    if (static_cast<int64_t>(verified_.size()) < keep) return;
    verified_.erase(verified_.begin(), verified_.end() - keep);
    const fs::path& oldest_kept = verified_.front();
    for (const fs::path& file : step_checkpoints()) {
        if (file < oldest_kept) fs::remove(file);
    }
}

}  // namespace hnas::train
