#include "experiments/child_process.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "base/check.h"

extern char** environ;

namespace hnas::experiments {

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
    if (done == pid_) status_ = WIFSIGNALED(status) ? 128 + WTERMSIG(status) : WEXITSTATUS(status);
    return status_;
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

}  // namespace hnas::experiments
