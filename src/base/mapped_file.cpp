#include "base/mapped_file.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <system_error>
#include <utility>

#include "base/check.h"

namespace hnas {

MappedFile::MappedFile(const std::string& path, const std::string& what) : path_(path) {
    const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    HNAS_CHECK(fd >= 0, what, " ", path, ": cannot open: ", std::system_category().message(errno));
    struct stat status{};
    if (::fstat(fd, &status) != 0) {
        const int error = errno;
        ::close(fd);
        HNAS_CHECK(false, what, " ", path, ": cannot stat: ", std::system_category().message(error));
    }
    size_ = static_cast<uint64_t>(status.st_size);
    if (size_ > 0) {
        void* mapped = ::mmap(nullptr, size_, PROT_READ, MAP_SHARED, fd, 0);
        const int error = errno;
        ::close(fd);
        HNAS_CHECK(mapped != MAP_FAILED, what, " ", path, ": cannot map ", size_, " bytes: ", std::system_category().message(error));
        data_ = static_cast<const uint8_t*>(mapped);
    } else {
        ::close(fd);
    }
}

MappedFile::~MappedFile() {
    if (data_ != nullptr) ::munmap(const_cast<uint8_t*>(data_), size_);
}

MappedFile::MappedFile(MappedFile&& other) noexcept
    : path_(std::move(other.path_)), data_(std::exchange(other.data_, nullptr)), size_(std::exchange(other.size_, 0)) {}

MappedFile& MappedFile::operator=(MappedFile&& other) noexcept {
    if (this != &other) {
        if (data_ != nullptr) ::munmap(const_cast<uint8_t*>(data_), size_);
        path_ = std::move(other.path_);
        data_ = std::exchange(other.data_, nullptr);
        size_ = std::exchange(other.size_, 0);
    }
    return *this;
}

}  // namespace hnas
