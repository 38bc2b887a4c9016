// Writing files so that a reader never sees half of one: the bytes go to a temporary file beside the
// destination, which is fsynced and renamed over it (and the directory fsynced). A crash, a full disk
// or an error leaves the previous file as it was and no temporary file behind.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace hnas {

class AtomicFile {
public:
    // `what` names the kind of file in errors ("checkpoint <path>: cannot write temporary file ...").
    AtomicFile(const std::string& destination, std::string what);
    ~AtomicFile();  // removes the temporary file unless commit() renamed it
    AtomicFile(const AtomicFile&) = delete;
    AtomicFile& operator=(const AtomicFile&) = delete;

    void write(const void* data, uint64_t length);
    // fsync, close, rename over the destination, fsync the directory.
    void commit();

private:
    [[noreturn]] void failure(const char* what) const;

    std::string destination_, what_, path_;
    int fd_ = -1;
    bool committed_ = false;
};

// `contents` written to `path` through an AtomicFile: decoded headlines, reports, configs.
void write_file_atomically(const std::string& path, std::string_view contents);

}  // namespace hnas
