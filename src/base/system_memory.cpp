#include "base/system_memory.h"

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

std::optional<int64_t> mem_available() {
    std::ifstream in("/proc/meminfo");
    std::string line;
    while (std::getline(in, line)) {
        std::istringstream fields(line);
        std::string name;
        int64_t kibibytes = 0;
        if (fields >> name >> kibibytes && name == "MemAvailable:") return kibibytes * 1024;
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
    if (const auto bytes = mem_available()) available = {*bytes, "MemAvailable in /proc/meminfo"};
    if (const auto room = cgroup_room(); room && room->first < available.bytes) available = {room->first, room->second};
    return available;
}

}  // namespace hnas
