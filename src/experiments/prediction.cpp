#include "experiments/prediction.h"

#include <algorithm>
#include <cctype>
#include <filesystem>
#include <vector>

#include "base/check.h"
#include "base/read_file.h"
#include "experiments/child_process.h"

namespace hnas::experiments {

namespace fs = std::filesystem;

namespace {

std::string without_trailing_space(std::string text) {
    while (!text.empty() && std::isspace(static_cast<unsigned char>(text.back()))) text.pop_back();
    return text;
}

// A commit's full hash: 40 hex digits (SHA-1), or 64 in a SHA-256 repository.
bool is_commit_hash(const std::string& text) {
    return (text.size() == 40 || text.size() == 64) &&
           std::all_of(text.begin(), text.end(), [](char c) { return std::isxdigit(static_cast<unsigned char>(c)) != 0; });
}

}  // namespace

Prediction read_committed_prediction(const std::string& path) {
    const std::string what = "sweep: --prediction " + path;
    HNAS_CHECK(fs::is_regular_file(path), what, ": no such file (a prediction is a markdown file committed to git, "
               "conventionally under docs/experiments/predictions/)");
    const auto executable = find_on_path("git");
    HNAS_CHECK(executable.has_value(), what, ": git is not on PATH (a prediction must be a file committed to git)");
    const fs::path file = fs::absolute(path);
    // Run in the file's own folder, so that it is asked of the file's repository, whatever the working folder.
    const auto git = [&](std::vector<std::string> arguments) {
        arguments.insert(arguments.begin(), {executable->string(), "--literal-pathspecs", "-C", file.parent_path().string()});
        return run_command(arguments);
    };
    const std::string name = file.filename().string();
    const CommandOutput repository = git({"rev-parse", "--show-toplevel"});
    HNAS_CHECK(repository.status == 0, what, ": not inside a git repository (git: ", without_trailing_space(repository.output), ")");
    const CommandOutput tracked = git({"ls-files", "--error-unmatch", "--full-name", "--", name});
    HNAS_CHECK(tracked.status == 0, what, ": not tracked by git; commit it before the sweep's first run");
    const CommandOutput last = git({"log", "-1", "--format=%H", "--", name});
    const std::string commit = without_trailing_space(last.output);
    HNAS_CHECK(last.status == 0, what, ": git log failed (status ", last.status, "): ", commit);
    HNAS_CHECK(!commit.empty(), what, ": never committed; commit it before the sweep's first run");
    HNAS_CHECK(is_commit_hash(commit), what, ": git log gave no commit hash but: ", commit);
    const CommandOutput changed = git({"diff", "--quiet", "HEAD", "--", name});
    HNAS_CHECK(changed.status != 1, what, ": has uncommitted changes; commit them before the sweep's first run");
    HNAS_CHECK(changed.status == 0, what, ": git diff failed (status ", changed.status, "): ",
               without_trailing_space(changed.output));
    return {read_file(path, "prediction"), without_trailing_space(tracked.output), commit};
}

}  // namespace hnas::experiments
