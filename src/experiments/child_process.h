// A child process of a sweep (`hnas train` or `hnas test` of one trial, or git asked about a
// prediction file). Its output is appended to a log file, and it receives SIGTERM when the sweep dies,
// even by SIGKILL: a training child then writes its checkpoint and stops, so a rerun of the sweep
// resumes it and nothing runs twice.
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
    int wait();  // the same, once it has ended
    void terminate();  // SIGTERM

private:
    pid_t pid_ = -1;
    std::optional<int> status_;
};

// This process's environment for a child: without the variables of an MPI launcher (a trial is one
// process, not a rank of the sweep's job), with `set` added or replacing.
std::vector<std::string> child_environment(const std::vector<std::pair<std::string, std::string>>& set);

// The file `name` resolves to on PATH, as the shell finds it (execve needs a path); none when no
// folder of PATH has it executable.
std::optional<std::filesystem::path> find_on_path(const std::string& name);

struct CommandOutput {
    int status = 0;
    std::string output;  // stdout and stderr together
};
// A short command (argv[0] a path) run to its end in this process's environment, its output caught in
// a temporary file.
CommandOutput run_command(const std::vector<std::string>& argv);

}  // namespace hnas::experiments
