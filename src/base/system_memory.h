// How much memory this process may still use: the smaller of the kernel's MemAvailable and what the
// cgroup's limit leaves (containers and CI runners are limited by their cgroup, not the host); and how
// much it holds.
#pragma once

#include <cstdint>
#include <string>

namespace hnas {

struct AvailableMemory {
    int64_t bytes = 0;
    std::string source;  // "MemAvailable in /proc/meminfo" or "the cgroup limit ... less its usage"
};

AvailableMemory available_memory();

// This process's resident memory now and at its peak (VmRSS and VmHWM in /proc/self/status), in bytes,
// 0 where the file does not say; and its minor page faults so far (getrusage), each a fresh page
// mapped in.
struct ProcessMemory {
    int64_t rss = 0, peak_rss = 0, minor_faults = 0;
};
ProcessMemory process_memory();

// glibc's heap (mallinfo2): bytes in blocks the program holds, and bytes of freed blocks the heap keeps
// mapped for reuse (tensor blocks among them; src/tensor/tensor.cpp).
struct HeapMemory {
    int64_t in_use = 0, free = 0;
};
HeapMemory heap_memory();

}  // namespace hnas
