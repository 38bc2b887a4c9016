#include "base/system_memory.h"

#include <malloc.h>
#include <sys/resource.h>

#include <fstream>
#include <limits>
#include <optional>
#include <sstream>

namespace hnas {

namespace {

// The first number in a file such as memory.max ("max" reads as no limit).
std::optional<int64_t> read_number(const std::string& path) {
    std::ifstream in(path);
    int64_t value = 0;
    if (!(in >> value)) return std::nullopt;
    return value;
}

// The "<name>: <n> kB" line of a /proc file such as meminfo or self/status, in bytes.
std::optional<int64_t> kibibyte_field(const std::string& path, const std::string& name) {
    std::ifstream in(path);
    std::string line;
    while (std::getline(in, line)) {
        std::istringstream fields(line);
        std::string key;
        int64_t kibibytes = 0;
        if (fields >> key >> kibibytes && key == name) return kibibytes * 1024;
    }
    return std::nullopt;
}

// cgroup v2, then v1; a v1 "unlimited" limit is a huge number, which the min() below ignores.
std::optional<std::pair<int64_t, std::string>> cgroup_room() {
    for (const auto& [limit, usage] : {std::pair<std::string, std::string>{"/sys/fs/cgroup/memory.max", "/sys/fs/cgroup/memory.current"},
                                       {"/sys/fs/cgroup/memory/memory.limit_in_bytes", "/sys/fs/cgroup/memory/memory.usage_in_bytes"}}) {
        const auto max = read_number(limit);
        const auto used = read_number(usage);
        if (max && used) return std::pair{*max - *used, "the cgroup limit " + limit + " less its usage"};
    }
    return std::nullopt;
}

}  // namespace

AvailableMemory available_memory() {
    AvailableMemory available{std::numeric_limits<int64_t>::max(), "no limit found"};
    if (const auto bytes = kibibyte_field("/proc/meminfo", "MemAvailable:")) available = {*bytes, "MemAvailable in /proc/meminfo"};
    if (const auto room = cgroup_room(); room && room->first < available.bytes) available = {room->first, room->second};
    return available;
}

ProcessMemory process_memory() {
    rusage usage{};
    getrusage(RUSAGE_SELF, &usage);
    return {kibibyte_field("/proc/self/status", "VmRSS:").value_or(0), kibibyte_field("/proc/self/status", "VmHWM:").value_or(0),
            static_cast<int64_t>(usage.ru_minflt)};
}

HeapMemory heap_memory() {
    const struct mallinfo2 heap = mallinfo2();
    return {static_cast<int64_t>(heap.uordblks + heap.hblkhd), static_cast<int64_t>(heap.fordblks)};
}

}  // namespace hnas
