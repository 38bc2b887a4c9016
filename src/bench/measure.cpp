// Timing and memory figures every benchmark reports.
#include <algorithm>

#include "base/system_memory.h"
#include "bench/bench.h"

namespace hnas::bench {

double median_seconds(const std::function<void()>& body, int warmup, int repeats) {
    for (int i = 0; i < warmup; ++i) body();
    std::vector<double> times;
    for (int i = 0; i < repeats; ++i) {
        const auto start = Clock::now();
        body();
        times.push_back(std::chrono::duration<double>(Clock::now() - start).count());
    }
    std::sort(times.begin(), times.end());
    return times[times.size() / 2];
}

double peak_rss_mib() { return static_cast<double>(process_memory().peak_rss) / (1 << 20); }

}  // namespace hnas::bench
