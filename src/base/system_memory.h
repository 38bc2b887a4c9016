// How much memory this process may still use: the smaller of the kernel's MemAvailable and what the
// cgroup's limit leaves (containers and CI runners are limited by their cgroup, not the host).
#pragma once

#include <cstdint>
#include <string>

namespace hnas {

struct AvailableMemory {
    int64_t bytes = 0;
    std::string source;  // "MemAvailable in /proc/meminfo" or "the cgroup limit ... less its usage"
};

AvailableMemory available_memory();

}  // namespace hnas
