// What hnas-bench's subcommands run (main.cpp has their flags); each prints its measurements.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "backend/matmul.h"
#include "nn/attention_norm.h"

namespace hnas::bench {

using Clock = std::chrono::steady_clock;

// Median seconds per call of `body` over `repeats` timed calls, after `warmup` untimed ones.
double median_seconds(const std::function<void()>& body, int warmup, int repeats);
double peak_rss_mib();

// `perf record --delay=-1 --control fifo:CTL,ACK` measures only while this is on: enable() and disable()
// write perf's command to CTL and wait for its "ack" on ACK, so a profile holds the timed steps alone,
// not the start-up and warm-up (whose first-touch page faults would otherwise count as the step's).
class PerfControl {
public:
    PerfControl() = default;  // no perf attached: enable() and disable() do nothing
    PerfControl(const std::string& control_fifo, const std::string& ack_fifo);
    void enable() { command("enable"); }
    void disable() { command("disable"); }

private:
    void command(const char* word);
    std::string control_fifo_, ack_fifo_;
};

// The numeric core (kernels.cpp).
void bench_linear(int warmup, int repeats, backend::MatmulPrecision precision);
void bench_attention(int warmup, int repeats, const std::vector<std::string>& only);
void bench_ot(int warmup, int repeats);

// The data pipeline and a run's batches (data.cpp).
void bench_data(const std::string& articles, const std::string& titles);
void bench_batches(const std::string& run_dir, int steps, const std::string& out);

// Training steps and optimizer steps of the reference models (train.cpp).
struct TrainBenchOptions {
    std::string task = "headline";  // headline | mlm (the config's task names)
    std::string kind = nn::default_attention_kind();  // encoder self-attention: any registered kind
    int steps = 20, warmup = 3;
    int threads = 0;               // 0: OMP_NUM_THREADS or all cores
    backend::MatmulPrecision precision = backend::MatmulPrecision::f32;
    uint64_t seed = 1;
    float learning_rate = 1e-4f;
    bool no_dropout = false;       // every dropout rate 0 (for loss comparisons across frameworks)
    std::string dump_initial;      // checkpoint of the initial parameters and the first batch
    bool matmul_bound = false;     // also time the products of one more step in oneDNN alone
    int64_t evict_mib = 64;        // the bound again with a buffer this large written before each product
    std::vector<std::string> perf_fifos;  // perf's control and ack FIFOs: profile the timed steps alone
};

void bench_train(const TrainBenchOptions& o);
void bench_optimizer(const std::string& task, int warmup, int repeats);

// Beam search of a trained headline model (decode.cpp).
struct DecodeBenchOptions {
    std::string checkpoint;
    std::string articles = "data/gigaword/test_1951/input.txt";
    int64_t count = 256;  // the first `count` articles
    int64_t beam = 4;
    int64_t batch = 32;
    backend::MatmulPrecision precision = backend::MatmulPrecision::f32;
    std::string out;      // where the batches, hypotheses and parameters go
};

void bench_decode(const DecodeBenchOptions& o);

}  // namespace hnas::bench
