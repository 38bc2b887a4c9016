#include "base/rng.h"

#include <cmath>
#include <numbers>

#include "base/check.h"

namespace hnas {

namespace {
uint64_t rotl(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }
}  // namespace

Rng::Rng(uint64_t seed, uint64_t stream) {
    uint64_t x = seed ^ mix64(stream ^ 0xD1B54A32D192ED03ull);
    for (auto& word : state_) {
        x += 0x9E3779B97F4A7C15ull;
        word = mix64(x);
    }
}

uint64_t Rng::next_u64() {
    const uint64_t result = rotl(state_[1] * 5, 7) * 9;
    const uint64_t t = state_[1] << 17;
    state_[2] ^= state_[0];
    state_[3] ^= state_[1];
    state_[1] ^= state_[2];
    state_[0] ^= state_[3];
    state_[2] ^= t;
    state_[3] = rotl(state_[3], 45);
    return result;
}

float Rng::uniform() { return unit_float(next_u64()); }

float Rng::uniform(float low, float high) { return low + (high - low) * uniform(); }

float Rng::normal() {
    // 1 - u keeps the logarithm's argument in (0, 1].
    const double u1 = 1.0 - static_cast<double>(next_u64() >> 11) * 0x1.0p-53;
    const double u2 = static_cast<double>(next_u64() >> 11) * 0x1.0p-53;
    return static_cast<float>(std::sqrt(-2.0 * std::log(u1)) * std::cos(2.0 * std::numbers::pi * u2));
}

uint64_t Rng::below(uint64_t bound) {
    HNAS_CHECK(bound > 0, "rng.below: bound must be positive");
    // Rejection sampling removes the modulo bias.
    const uint64_t limit = UINT64_MAX - UINT64_MAX % bound;
    uint64_t x;
    do x = next_u64();
    while (x >= limit);
    return x % bound;
}

}  // namespace hnas
