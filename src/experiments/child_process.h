// A child process of a sweep (`hnas train` or `hnas test` of one trial). Its output is appended to a
// log file, and it receives SIGTERM when the sweep dies, even by SIGKILL: a training child then writes
// its checkpoint and stops, so a rerun of the sweep resumes it and nothing runs twice.
#pragma once

#include <sys/types.h>

#include <filesystem>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace hnas::experiments {

class ChildProcess {
public:
    // Starts argv[0] (a path) with `environment` ("NAME=value" entries), stdout and stderr appended to
    // `log`; `inherited_fd` (≥ 0) stays open in the child, with whatever lock it holds.
    ChildProcess(const std::vector<std::string>& argv, const std::vector<std::string>& environment,
                 const std::filesystem::path& log, int inherited_fd = -1);
    // A child still running gets SIGTERM and is waited for.
    ~ChildProcess();
    ChildProcess(const ChildProcess&) = delete;
    ChildProcess& operator=(const ChildProcess&) = delete;

    // Its exit status once it has ended (128 + N when signal N ended it), without blocking.
    std::optional<int> poll();
    void terminate();  // SIGTERM

private:
    pid_t pid_ = -1;
    std::optional<int> status_;
};

// This process's environment for a child: without the variables of an MPI launcher (a trial is one
// process, not a rank of the sweep's job), with `set` added or replacing.
std::vector<std::string> child_environment(const std::vector<std::pair<std::string, std::string>>& set);

}  // namespace hnas::experiments
