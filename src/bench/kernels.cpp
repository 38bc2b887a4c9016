// hnas-bench linear, attention and ot: the numeric core's ops against oneDNN and against each other.
#include <fmt/format.h>

#include <algorithm>
#include <cstdio>

#include "base/number_format.h"
#include "bench/bench.h"
#include "nn/attention.h"
#include "ops/ops.h"
#include "tensor/random.h"

namespace hnas::bench {

// "f32" / "bf16" (as CLI11 checked it) to the backend's setting.
void bench_linear(int warmup, int repeats, hnas::backend::MatmulPrecision precision) {
    backend::set_matmul_precision(precision);
    std::printf("linear forward+backward vs raw oneDNN matmul (%s, %s matmuls)\n", backend::describe().c_str(),
                name_of(precision));
    fmt::print("{:<27} {:>12} {:>12} {:>8}\n", "x·Wᵀ shape", "hnas GFLOP/s", "oneDNN", "ratio");
    const int64_t rows = 4096, in = 768;
    for (int64_t out : {int64_t{768}, int64_t{3072}}) {
        Rng rng(1);
        Var x(uniform_tensor(rng, {rows, in}, -1, 1), true);
        Var weight(uniform_tensor(rng, {out, in}, -0.05f, 0.05f), true);
        Var bias(Tensor::zeros({out}), true);
        const Tensor grad_out = uniform_tensor(rng, {rows, out}, -1, 1);
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
        fmt::print("{:<27} {:>12.1f} {:>12.1f} {:>8.3f}\n", fmt::format("({}x{})·({}x{})ᵀ", rows, in, out, in),
                   portable(flops / t_hnas * 1e-9), portable(flops / t_raw * 1e-9), portable(t_raw / t_hnas));
    }
}

// One attention layer at a fixed reference shape (batch 32, 4 heads, L = 128, d = 256), forward and
// backward, each kind timed in alternating rounds and reported relative to lnas.
void bench_attention(int warmup, int repeats, const std::vector<std::string>& only) {
    const int64_t batch = 32, length = 128, width = 256, heads = 4;
    std::printf("multi-head attention forward+backward, B=%lld H=%lld L=%lld d=%lld (%s)\n", static_cast<long long>(batch),
                static_cast<long long>(heads), static_cast<long long>(length), static_cast<long long>(width),
                backend::describe().c_str());
    Rng rng(1);
    const Tensor x = uniform_tensor(rng, {batch, length, width}, -1, 1);
    const Tensor grad_out = uniform_tensor(rng, {batch, length, width}, -1, 1);
    std::vector<float> valid_values;  // ragged padding, as in real batches
    for (int64_t b = 0; b < batch; ++b)
        for (int64_t t = 0; t < length; ++t) valid_values.push_back(t < length - (b % 8) * 8 ? 1.0f : 0.0f);
    const Tensor valid = Tensor::from_floats({batch, length}, valid_values);
    const ops::AttentionMask mask{valid, valid};

    std::vector<std::string> kinds;
    std::vector<std::unique_ptr<nn::MultiHeadAttention>> layers;
    for (const nn::AttentionKind* kind : nn::attention_kinds()) {
        if (kind->name != nn::default_attention_kind() && !only.empty() && std::find(only.begin(), only.end(), kind->name) == only.end()) continue;
        nn::AttentionOptions options;
        options.width = width;
        options.heads = heads;
        options.kind = kind->name;
        Rng init(2), dropout(3);
        kinds.push_back(kind->name);
        layers.push_back(std::make_unique<nn::MultiHeadAttention>(options, init, dropout));
    }
    std::vector<std::vector<double>> times(kinds.size());
    for (int round = 0; round < 5; ++round) {
        for (size_t k = 0; k < kinds.size(); ++k) {
            Var input(x, true);
            times[k].push_back(median_seconds(
                [&] {
                    layers[k]->zero_grad();
                    input.zero_grad();
                    layers[k]->forward(input, input, mask).backward(grad_out);
                },
                warmup, repeats));
        }
    }
    fmt::print("{:<12} {:>12} {:>10}\n", "kind", "ms/step", "vs lnas");
    for (auto& t : times) std::sort(t.begin(), t.end());
    const double lnas = times[0][2];
    for (size_t k = 0; k < kinds.size(); ++k) {
        fmt::print("{:<12} {:>12.2f} {:>10.3f}\n", kinds[k], portable(1e3 * times[k][2]), portable(times[k][2] / lnas));
    }
}

// Paper 003's OT attention (Eq. 25) against LNAS as normalizations alone, forward and backward, at
// B 32, 4 heads, n = 128 queries and input templates, and |A| = n or 2n templates (the input's and
// another example's); its cost is O(queries × n × |A|) per head against LNAS's O(queries × n).
void bench_ot(int warmup, int repeats) {
    const int64_t batch = 32, heads = 4, length = 128;
    fmt::print("attention normalization forward+backward, B={} H={} queries = input templates n = {} ({})\n", batch, heads,
               length, backend::describe());
    Rng rng(1);
    struct Case {
        std::string name;
        std::function<void()> step;
    };
    std::vector<Case> cases;
    Var lnas_scores(uniform_tensor(rng, {batch, heads, length, length}, -2, 2), true);
    const Tensor lnas_grad = uniform_tensor(rng, {batch, heads, length, length}, -1, 1);
    cases.push_back({"lnas, n keys", [&] {
                         lnas_scores.zero_grad();
                         ops::normalize_attention(lnas_scores, ops::AttentionMask{}, {ops::NormalizeAxis::keys}).backward(lnas_grad);
                     }});
    std::vector<Var> ot_scores, ot_similarity;
    std::vector<Tensor> ot_grads;
    for (int64_t templates : {length, 2 * length}) {
        ot_scores.emplace_back(uniform_tensor(rng, {batch, heads, length, templates}, -2, 2), true);
        ot_similarity.emplace_back(uniform_tensor(rng, {batch, heads, templates, length}, -2, 2), true);
        ot_grads.push_back(uniform_tensor(rng, {batch, heads, length, templates}, -1, 1));
    }
    for (size_t k = 0; k < ot_scores.size(); ++k) {
        cases.push_back({fmt::format("ot, |A| = {}", ot_scores[k].value().dim(3)), [&, k] {
                             ot_scores[k].zero_grad();
                             ot_similarity[k].zero_grad();
                             ops::ot_attention(ot_scores[k], ot_similarity[k], Var(), ops::AttentionMask{}).backward(ot_grads[k]);
                         }});
    }
    std::vector<std::vector<double>> times(cases.size());
    for (int round = 0; round < 5; ++round)
        for (size_t k = 0; k < cases.size(); ++k) times[k].push_back(median_seconds(cases[k].step, warmup, repeats));
    for (auto& t : times) std::sort(t.begin(), t.end());
    fmt::print("{:<16} {:>12} {:>10}\n", "normalization", "ms/step", "vs lnas");
    for (size_t k = 0; k < cases.size(); ++k) {
        fmt::print("{:<16} {:>12.2f} {:>10.1f}\n", cases[k].name, portable(1e3 * times[k][2]), portable(times[k][2] / times[0][2]));
    }
}

}  // namespace hnas::bench
