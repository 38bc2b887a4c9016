// Seeded random numbers, reproducible across runs, machines and thread counts.
// Rng is xoshiro256** seeded through splitmix64 from (seed, stream): independent streams for
// initialization, dropout and data order come from one config seed. Its state can be saved in a
// checkpoint and restored, so a resumed run draws exactly what an uninterrupted one would.
#pragma once

#include <array>
#include <cstdint>

#include "base/hash.h"

namespace hnas {

// The top 24 bits of a random word as a float in [0, 1).
inline float unit_float(uint64_t bits) { return static_cast<float>(bits >> 40) * 0x1.0p-24f; }

class Rng {
public:
    using State = std::array<uint64_t, 4>;

    explicit Rng(uint64_t seed = 0, uint64_t stream = 0);

    uint64_t next_u64();
    float uniform();                    // [0, 1)
    float uniform(float low, float high);
    float normal();                     // standard normal (Box-Muller, no cached second value)
    uint64_t below(uint64_t bound);     // uniform integer in [0, bound)

    State state() const { return state_; }
    void set_state(const State& state) { state_ = state; }

private:
    State state_;
};

}  // namespace hnas
