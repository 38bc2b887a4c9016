// Length-bucketed batch planning, the data position's JSON form and the derived random streams
// (see batching.h).
#include "data/batching.h"

#include <algorithm>
#include <cstdio>
#include <nlohmann/json.hpp>
#include <limits>
#include <numeric>
#include <string>

#include "base/check.h"
#include "base/hash.h"

namespace hnas::data {

int64_t padded_length(int64_t longest, const BatchOptions& options, int64_t limit) {
    HNAS_CHECK(options.pad_multiple >= 1, "batch options: pad_multiple must be at least 1, got ", options.pad_multiple);
    const int64_t rounded = (longest + options.pad_multiple - 1) / options.pad_multiple * options.pad_multiple;
    return std::max(longest, std::min(rounded, limit));
}

uint64_t hash_padding(uint64_t fingerprint, const BatchOptions& options) {
    return options.pad_multiple == 1 ? fingerprint : hash_combine(fingerprint, static_cast<uint64_t>(options.pad_multiple));
}

void check_batch_options(const BatchOptions& options, int64_t longest_row, const char* context) {
    HNAS_CHECK(options.max_sentences >= 0 && options.max_tokens >= 0, context,
               ": max_sentences and max_tokens must not be negative");
    HNAS_CHECK(options.max_sentences > 0 || options.max_tokens > 0, context,
               ": set max_sentences or max_tokens (or both) to bound a batch");
    HNAS_CHECK(options.max_tokens == 0 || options.max_tokens >= longest_row, context, ": max_tokens ",
               options.max_tokens, " is smaller than the longest possible row (", longest_row, " tokens)");
}

std::vector<std::vector<uint32_t>> plan_batches(std::span<const uint64_t> sort_keys,
                                                std::span<const int64_t> row_sizes, const BatchOptions& options,
                                                Rng* rng) {
    HNAS_CHECK(sort_keys.size() == row_sizes.size(), "plan_batches: ", sort_keys.size(), " sort keys for ",
               row_sizes.size(), " rows");
    HNAS_CHECK(sort_keys.size() <= std::numeric_limits<uint32_t>::max(), "plan_batches: ", sort_keys.size(),
               " rows are more than uint32 row indices reach");
    std::vector<uint32_t> order(sort_keys.size());
    std::iota(order.begin(), order.end(), 0u);
    if (rng != nullptr) shuffle_in_place(order, *rng);
    std::stable_sort(order.begin(), order.end(),
                     [&](uint32_t a, uint32_t b) { return sort_keys[a] < sort_keys[b]; });

    std::vector<std::vector<uint32_t>> batches;
    std::vector<uint32_t> current;
    int64_t longest = 0;
    for (uint32_t index : order) {
        const int64_t size = row_sizes[index];
        HNAS_CHECK(options.max_tokens == 0 || size <= options.max_tokens, "plan_batches: a row of ", size,
                   " tokens exceeds max_tokens ", options.max_tokens);
        const int64_t rows = static_cast<int64_t>(current.size());
        const bool full_rows = options.max_sentences > 0 && rows == options.max_sentences;
        // The budget counts the padded length uncapped: never more than the batch will hold.
        const int64_t padded = padded_length(std::max(longest, size), options, std::numeric_limits<int64_t>::max());
        const bool full_tokens = options.max_tokens > 0 && padded * (rows + 1) > options.max_tokens;
        if (!current.empty() && (full_rows || full_tokens)) {
            batches.push_back(std::move(current));
            current.clear();
            longest = 0;
        }
        current.push_back(index);
        longest = std::max(longest, size);
    }
    if (!current.empty()) batches.push_back(std::move(current));
    if (rng != nullptr) shuffle_in_place(batches, *rng);
    return batches;
}

void to_json(nlohmann::json& json, const DataPosition& position) {
    char hex[17];
    std::snprintf(hex, sizeof hex, "%016llx", static_cast<unsigned long long>(position.fingerprint));
    json = nlohmann::json{{"epoch", position.epoch},
                          {"window", position.window},
                          {"batch", position.batch},
                          {"examples", position.examples},
                          {"fingerprint", hex}};
}

void from_json(const nlohmann::json& json, DataPosition& position) {
    HNAS_CHECK(json.is_object(), "data position: expected a JSON object, got ", json.type_name());
    auto count = [&](const char* key) {
        HNAS_CHECK(json.contains(key), "data position: missing key '", key, "'");
        const nlohmann::json& value = json.at(key);
        HNAS_CHECK(value.is_number_integer() && value.get<int64_t>() >= 0, "data position: '", key,
                   "' must be a non-negative integer, got ", value.dump());
        return value.get<int64_t>();
    };
    position.epoch = count("epoch");
    position.window = count("window");
    position.batch = count("batch");
    position.examples = count("examples");
    HNAS_CHECK(json.contains("fingerprint"), "data position: missing key 'fingerprint'");
    const nlohmann::json& fingerprint = json.at("fingerprint");
    const std::string hex = fingerprint.is_string() ? fingerprint.get<std::string>() : std::string();
    HNAS_CHECK(hex.size() == 16 && hex.find_first_not_of("0123456789abcdef") == std::string::npos,
               "data position: 'fingerprint' must be 16 lowercase hex digits, got ", fingerprint.dump());
    position.fingerprint = std::stoull(hex, nullptr, 16);
}

Rng derive_rng(uint64_t seed, uint64_t purpose, uint64_t epoch, uint64_t window) {
    return Rng(seed, hash_combine(hash_combine(purpose, epoch), window));
}

}  // namespace hnas::data
