#include "experiments/child_process.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>

#include "base/check.h"
#include "base/read_file.h"

extern char** environ;

namespace hnas::experiments {

namespace {

int exit_status(int status) { return WIFSIGNALED(status) ? 128 + WTERMSIG(status) : WEXITSTATUS(status); }

}  // namespace

ChildProcess::ChildProcess(const std::vector<std::string>& argv, const std::vector<std::string>& environment,
                           const std::filesystem::path& log, int inherited_fd) {
    HNAS_CHECK(!argv.empty(), "child process: no program");
    const int log_fd = ::open(log.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
    HNAS_CHECK(log_fd >= 0, "cannot open the log ", log.string(), ": ", std::strerror(errno));
    // Everything the child needs is built before fork: after it only async-signal-safe calls are allowed.
    std::vector<char*> args, env;
    for (const std::string& arg : argv) args.push_back(const_cast<char*>(arg.c_str()));
    args.push_back(nullptr);
    for (const std::string& entry : environment) env.push_back(const_cast<char*>(entry.c_str()));
    env.push_back(nullptr);
    const pid_t parent = ::getpid();
    pid_ = ::fork();
    if (pid_ == 0) {
        ::prctl(PR_SET_PDEATHSIG, SIGTERM);
        if (::getppid() != parent) ::_exit(128 + SIGTERM);  // the parent died before prctl took effect
        ::dup2(log_fd, STDOUT_FILENO);
        ::dup2(log_fd, STDERR_FILENO);
        if (inherited_fd >= 0) ::fcntl(inherited_fd, F_SETFD, 0);
        ::execve(args[0], args.data(), env.data());
        ::_exit(127);
    }
    const int fork_error = errno;
    ::close(log_fd);
    HNAS_CHECK(pid_ > 0, "cannot start ", argv[0], ": ", std::strerror(fork_error));
}

ChildProcess::~ChildProcess() {
    if (pid_ <= 0 || status_) return;
    terminate();
    int status = 0;
    while (::waitpid(pid_, &status, 0) < 0 && errno == EINTR) {
    }
}

std::optional<int> ChildProcess::poll() {
    if (status_) return status_;
    int status = 0;
    const pid_t done = ::waitpid(pid_, &status, WNOHANG);
    if (done == pid_) status_ = exit_status(status);
    return status_;
}

int ChildProcess::wait() {
    while (!status_) {
        int status = 0;
        if (::waitpid(pid_, &status, 0) == pid_) {
            status_ = exit_status(status);
        } else {
            HNAS_CHECK(errno == EINTR, "cannot wait for the child process ", pid_, ": ", std::strerror(errno));
        }
    }
    return *status_;
}

void ChildProcess::terminate() {
    if (!status_) ::kill(pid_, SIGTERM);
}

std::vector<std::string> child_environment(const std::vector<std::pair<std::string, std::string>>& set) {
    static const char* const kLauncherPrefixes[] = {"OMPI_", "PMIX_", "PMI_", "HYDRA_", "PRTE_", "OPAL_"};
    std::vector<std::string> out;
    for (char** entry = environ; *entry != nullptr; ++entry) {
        const std::string text = *entry;
        const std::string name = text.substr(0, text.find('='));
        bool dropped = false;
        for (const char* prefix : kLauncherPrefixes) dropped = dropped || name.starts_with(prefix);
        for (const auto& [key, value] : set) dropped = dropped || name == key;
        if (!dropped) out.push_back(text);
    }
    for (const auto& [key, value] : set) out.push_back(key + "=" + value);
    return out;
}

std::optional<std::filesystem::path> find_on_path(const std::string& name) {
    const char* path = std::getenv("PATH");
    const std::string folders = path != nullptr ? path : "/usr/bin:/bin";
    for (size_t start = 0; start <= folders.size();) {
        const size_t end = std::min(folders.find(':', start), folders.size());
        // An empty entry is the current folder, as for the shell.
        const std::filesystem::path candidate = std::filesystem::path(folders.substr(start, end - start)) / name;
        std::error_code unreadable;  // a folder of PATH this process may not search is skipped, as by the shell
        if (std::filesystem::is_regular_file(candidate, unreadable) && ::access(candidate.c_str(), X_OK) == 0) return candidate;
        start = end + 1;
    }
    return std::nullopt;
}

CommandOutput run_command(const std::vector<std::string>& argv) {
    const std::filesystem::path folder = std::filesystem::temp_directory_path();
    std::string log = (folder / "hnas-command-XXXXXX").string();
    const int fd = ::mkstemp(log.data());
    HNAS_CHECK(fd >= 0, "cannot create a temporary file in ", folder.string(), " for the output of ", argv.at(0), ": ",
               std::strerror(errno));
    ::close(fd);
    struct Removal {
        const std::string& path;
        ~Removal() { ::unlink(path.c_str()); }
    } removal{log};
    ChildProcess child(argv, child_environment({}), log);
    CommandOutput out;
    out.status = child.wait();
    out.output = read_file(log, "the output of " + argv.front());
    return out;
}

}  // namespace hnas::experiments
