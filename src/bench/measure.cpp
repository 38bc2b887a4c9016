// Timing and memory figures every benchmark reports.
#include <algorithm>
#include <fstream>

#include "base/check.h"
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

PerfControl::PerfControl(const std::string& control_fifo, const std::string& ack_fifo)
    : control_fifo_(control_fifo), ack_fifo_(ack_fifo) {}

void PerfControl::command(const char* word) {
    if (control_fifo_.empty()) return;
    {
        std::ofstream control(control_fifo_);
        HNAS_CHECK(control, "hnas-bench: cannot open perf's control FIFO ", control_fifo_);
        control << word << '\n' << std::flush;
        HNAS_CHECK(control, "hnas-bench: cannot write '", word, "' to perf's control FIFO ", control_fifo_);
    }
    std::ifstream ack(ack_fifo_);
    std::string reply;
    HNAS_CHECK(ack && std::getline(ack, reply) && reply.rfind("ack", 0) == 0, "hnas-bench: perf did not acknowledge '",
               word, "' on ", ack_fifo_, " (read '", reply, "')");
}

double peak_rss_mib() { return static_cast<double>(process_memory().peak_rss) / (1 << 20); }

}  // namespace hnas::bench
