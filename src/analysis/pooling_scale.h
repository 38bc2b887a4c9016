// Paper 002 Fig. 1 (middle, right) and App. B: at random weights, how the scale of a pooled output
// depends on the sequence length N. Query, key and value vectors are drawn from N(0, I) and split into
// sequences of N; each aggregator pools every sequence, and the output's standard deviation (over all its
// values) and mean norm are measured. The paper's point: softmax attention scales like mean pooling, so
// the share of context in a residual sum shrinks as N grows. hnas runs every attention kind of its
// registry (at its defaults, scores q·k/√d) beside the paper's poolings.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "base/json.h"

namespace hnas::analysis {

struct PoolingScaleOptions {
    std::vector<int64_t> lengths{1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024, 2048};  // the paper's N
    int64_t vectors = 16384;  // per length, split into vectors / N sequences (N must divide it)
    int64_t width = 128;      // d_h
    uint64_t seed = 1;
};

struct PoolingScaleRow {
    std::string aggregator;  // "mean", "sum", "max", "normalized_sum" or an attention kind's name
    int64_t length = 0;
    double output_std = 0.0, mean_norm = 0.0;
};

// Every aggregator at every length, aggregators in the order: the poolings, then the registry's kinds
// that weigh their own keys (a kind that compares templates needs templates beyond the input: left out).
std::vector<PoolingScaleRow> run_pooling_scale(const PoolingScaleOptions& options);

// Per aggregator, the least-squares slope of ln(output_std) against ln N over lengths ≥ `from`.
Json pooling_scale_slopes(const std::vector<PoolingScaleRow>& rows, int64_t from = 16);

}  // namespace hnas::analysis
