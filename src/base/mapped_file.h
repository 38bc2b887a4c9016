// A file mapped read-only into memory: its pages come from the page cache and count as the file's,
// not as the process's anonymous memory, so a corpus far larger than memory can be read in place
// (prepared data, docs/data.md).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

namespace hnas {

class MappedFile {
public:
    MappedFile() = default;
    // Maps all of `path`; throws naming `what` and the file when it cannot be opened or mapped.
    MappedFile(const std::string& path, const std::string& what);
    ~MappedFile();
    MappedFile(MappedFile&& other) noexcept;
    MappedFile& operator=(MappedFile&& other) noexcept;
    MappedFile(const MappedFile&) = delete;
    MappedFile& operator=(const MappedFile&) = delete;

    const uint8_t* data() const { return data_; }
    uint64_t size() const { return size_; }
    const std::string& path() const { return path_; }

private:
    std::string path_;
    const uint8_t* data_ = nullptr;
    uint64_t size_ = 0;
};

}  // namespace hnas
