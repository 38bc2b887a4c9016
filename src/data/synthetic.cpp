#include "data/synthetic.h"

#include <algorithm>

#include "base/check.h"

namespace hnas::data {

DistinctionLabel case_distinction_label(std::span<const int32_t> symbols) {
    HNAS_CHECK(!symbols.empty(), "case distinction: an empty sequence has no label");
    const auto contains = [&](int32_t symbol) { return std::find(symbols.begin(), symbols.end(), symbol) != symbols.end(); };
    const auto position = [&](auto it) { return static_cast<int32_t>(it - symbols.begin()); };
    // std::min_element / max_element return the first extremum, as numpy's argmin / argmax do.
    if (contains(kArgminMarker)) return {position(std::min_element(symbols.begin(), symbols.end())), DistinctionCase::argmin};
    if (contains(kFirstMarker)) return {0, DistinctionCase::first};
    return {position(std::max_element(symbols.begin(), symbols.end())), DistinctionCase::argmax};
}

int32_t mode_label(std::span<const int32_t> symbols, int32_t symbol_count) {
    std::vector<int64_t> counts(static_cast<size_t>(symbol_count), 0);
    for (const int32_t symbol : symbols) {
        HNAS_CHECK(symbol >= 0 && symbol < symbol_count, "mode finding: symbol ", symbol, " is outside 0 … ", symbol_count - 1);
        ++counts[static_cast<size_t>(symbol)];
    }
    // max_element keeps the first (smallest) symbol among equal counts.
    return static_cast<int32_t>(std::max_element(counts.begin(), counts.end()) - counts.begin());
}

SyntheticBatch synthetic_batch(const SyntheticOptions& options, uint64_t index) {
    HNAS_CHECK(options.symbols > 0 && options.length > 0 && options.batch > 0, "synthetic data: symbols ", options.symbols,
               ", length ", options.length, " and batch ", options.batch, " must be positive");
    HNAS_CHECK(options.problem != SyntheticProblem::case_distinction || options.symbols > kArgminMarker,
               "case distinction needs more than ", kArgminMarker, " symbols (its markers are ", kFirstMarker, " and ",
               kArgminMarker, "), got ", options.symbols);
    Rng rng(options.seed, index);
    SyntheticBatch batch;
    batch.rows = options.batch;
    batch.length = options.length;
    batch.symbols.resize(static_cast<size_t>(options.batch * options.length));
    for (int32_t& symbol : batch.symbols) symbol = static_cast<int32_t>(rng.below(static_cast<uint64_t>(options.symbols)));
    for (int64_t row = 0; row < options.batch; ++row) {
        const std::span<const int32_t> sequence(batch.symbols.data() + row * options.length, static_cast<size_t>(options.length));
        if (options.problem == SyntheticProblem::mode) {
            batch.labels.push_back(mode_label(sequence, options.symbols));
            continue;
        }
        const DistinctionLabel label = case_distinction_label(sequence);
        batch.labels.push_back(label.position);
        batch.rules.push_back(label.rule);
    }
    return batch;
}

}  // namespace hnas::data
