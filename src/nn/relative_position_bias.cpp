#include "nn/relative_position_bias.h"

#include <algorithm>
#include <cmath>

#include "ops/ops.h"

namespace hnas::nn {

int64_t relative_position_bucket(int64_t relative, const RelativePositionOptions& options) {
    int64_t buckets = options.buckets, bucket = 0, distance = 0;
    if (options.bidirectional) {
        buckets /= 2;
        bucket = relative > 0 ? buckets : 0;
        distance = std::abs(relative);
    } else {
        distance = std::max<int64_t>(-relative, 0);  // keys in the future all share bucket 0
    }
    const int64_t max_exact = buckets / 2;
    if (distance < max_exact) return bucket + distance;
    // Truncation toward zero, as T5 converts the float to an integer.
    const auto logarithmic = static_cast<int64_t>(
        static_cast<float>(max_exact) +
        std::log(static_cast<float>(distance) / static_cast<float>(max_exact)) /
            std::log(static_cast<float>(options.max_distance) / static_cast<float>(max_exact)) *
            static_cast<float>(buckets - max_exact));
    return bucket + std::min(logarithmic, buckets - 1);
}

RelativePositionBias::RelativePositionBias(int64_t heads, const RelativePositionOptions& options)
    : options_(options), heads_(heads) {
    HNAS_CHECK(options.buckets >= (options.bidirectional ? 4 : 2) && options.max_distance > options.buckets / 2,
               "relative position prior: needs at least ", options.bidirectional ? 4 : 2,
               " buckets and max_distance above half the buckets, got ", options.buckets, " buckets and max_distance ",
               options.max_distance);
    table_ = register_parameter("weight", Tensor::zeros({options.buckets, heads}), ParameterRole::no_decay);
}

Var RelativePositionBias::forward(int64_t queries, int64_t keys, int64_t query_offset) const {
    std::vector<int32_t> buckets(static_cast<size_t>(queries * keys));
    for (int64_t i = 0; i < queries; ++i)
        for (int64_t j = 0; j < keys; ++j)
            buckets[static_cast<size_t>(i * keys + j)] =
                static_cast<int32_t>(relative_position_bucket(j - (i + query_offset), options_));
    Var bias = ops::embedding(table_, Tensor::from_ints({queries, keys}, buckets));  // (Lq, Lk, H)
    return ops::reshape(ops::permute(bias, {2, 0, 1}), {1, heads_, queries, keys});  // (1, H, Lq, Lk)
}

}  // namespace hnas::nn
