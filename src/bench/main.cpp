// hnas-bench: micro-benchmarks of the numeric core, printed as tables. Not a test: it asserts nothing.
//   hnas-bench linear   the linear op's forward+backward against raw oneDNN matmuls on the same shapes
#include <CLI/CLI.hpp>
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <functional>
#include <vector>

#include "backend/matmul.h"
#include "ops/ops.h"

namespace {

using Clock = std::chrono::steady_clock;

// Median seconds per call of `body` over `repeats` timed calls, after `warmup` untimed ones.
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

void bench_linear(int warmup, int repeats) {
    using namespace hnas;
    std::printf("linear forward+backward vs raw oneDNN matmul (%s)\n", backend::describe().c_str());
    std::printf("%-28s %12s %12s %8s\n", "x·Wᵀ shape", "hnas GFLOP/s", "oneDNN", "ratio");
    const int64_t rows = 4096, in = 768;
    for (int64_t out : {int64_t{768}, int64_t{3072}}) {
        Rng rng(1);
        Var x(rng.uniform_tensor({rows, in}, -1, 1), true);
        Var weight(rng.uniform_tensor({out, in}, -0.05f, 0.05f), true);
        Var bias(Tensor::zeros({out}), true);
        const Tensor grad_out = rng.uniform_tensor({rows, out}, -1, 1);
        // The op: y = x·Wᵀ + b, then dx, dW and db from a given output gradient.
        auto hnas_step = [&] {
            x.zero_grad();
            weight.zero_grad();
            bias.zero_grad();
            ops::linear(x, weight, bias).backward(grad_out);
        };
        Tensor y = Tensor::empty({rows, out}), dx = Tensor::empty({rows, in}), dw = Tensor::empty({out, in});
        auto raw_step = [&] {
            backend::matmul(x.value().data(), weight.value().data(), y.data(), {1, rows, out, in, false, true});
            backend::matmul(grad_out.data(), weight.value().data(), dx.data(), {1, rows, in, out});
            backend::matmul(grad_out.data(), x.value().data(), dw.data(), {1, out, in, rows, true, false});
        };
        const double flops = 3.0 * 2.0 * static_cast<double>(rows * in * out);
        // Alternate the two in rounds so drifts in machine speed hit both alike; report medians.
        std::vector<double> raw_times, hnas_times;
        for (int round = 0; round < 5; ++round) {
            raw_times.push_back(median_seconds(raw_step, warmup, repeats));
            hnas_times.push_back(median_seconds(hnas_step, warmup, repeats));
        }
        std::sort(raw_times.begin(), raw_times.end());
        std::sort(hnas_times.begin(), hnas_times.end());
        const double t_raw = raw_times[2], t_hnas = hnas_times[2];
        char label[64];
        std::snprintf(label, sizeof label, "(%lldx%lld)·(%lldx%lld)ᵀ", static_cast<long long>(rows),
                      static_cast<long long>(in), static_cast<long long>(out), static_cast<long long>(in));
        std::printf("%-30s %12.1f %12.1f %8.3f\n", label, flops / t_hnas * 1e-9, flops / t_raw * 1e-9, t_raw / t_hnas);
    }
}

}  // namespace

int main(int argc, char** argv) {
    CLI::App app{"hnas-bench: micro-benchmarks of the numeric core"};
    int warmup = 3, repeats = 15;
    app.add_option("--warmup", warmup, "Untimed calls before timing")->check(CLI::NonNegativeNumber);
    app.add_option("--repeats", repeats, "Timed calls; the median is reported")->check(CLI::PositiveNumber);
    app.require_subcommand(1);
    app.add_subcommand("linear", "linear forward+backward GFLOP/s against raw oneDNN matmul")->callback([&] {
        bench_linear(warmup, repeats);
    });
    CLI11_PARSE(app, argc, argv);
    return 0;
}
