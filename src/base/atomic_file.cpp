#include "base/atomic_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <filesystem>
#include <system_error>
#include <utility>

#include "base/check.h"

namespace hnas {

namespace {
std::string errno_text() { return std::system_category().message(errno); }
}  // namespace

AtomicFile::AtomicFile(const std::string& destination, std::string what)
    : destination_(destination), what_(std::move(what)), path_(destination + ".tmp." + std::to_string(::getpid())) {
    fd_ = ::open(path_.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0666);
    if (fd_ < 0) failure("cannot create");
}

AtomicFile::~AtomicFile() {
    if (fd_ >= 0) ::close(fd_);
    if (!committed_) ::unlink(path_.c_str());
}

void AtomicFile::write(const void* data, uint64_t length) {
    const auto* in = static_cast<const char*>(data);
    while (length > 0) {
        const size_t chunk = static_cast<size_t>(std::min<uint64_t>(length, uint64_t{1} << 30));
        const ssize_t put = ::write(fd_, in, chunk);
        if (put < 0 && errno == EINTR) continue;
        if (put < 0) failure("cannot write");
        in += put;
        length -= static_cast<uint64_t>(put);
    }
}

void AtomicFile::commit() {
    if (::fsync(fd_) != 0) failure("cannot fsync");
    const int fd = std::exchange(fd_, -1);
    if (::close(fd) != 0) failure("cannot close");
    if (::rename(path_.c_str(), destination_.c_str()) != 0) failure("cannot rename over the destination");
    committed_ = true;
    const std::filesystem::path parent = std::filesystem::path(destination_).parent_path();
    const std::string directory = parent.empty() ? std::string(".") : parent.string();
    const int dir_fd = ::open(directory.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    HNAS_CHECK(dir_fd >= 0, what_, " ", destination_, ": written, but cannot open directory ", directory, ": ", errno_text());
    const int synced = ::fsync(dir_fd);
    const std::string reason = errno_text();
    ::close(dir_fd);
    HNAS_CHECK(synced == 0, what_, " ", destination_, ": written, but cannot fsync directory ", directory, ": ", reason);
}

void AtomicFile::failure(const char* what) const {
    throw Error(concat_message(what_, " ", destination_, ": ", what, " temporary file ", path_, ": ", errno_text()));
}

void write_file_atomically(const std::string& path, std::string_view contents) {
    AtomicFile file(path, "file");
    file.write(contents.data(), contents.size());
    file.commit();
}

}  // namespace hnas
