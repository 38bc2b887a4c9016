// Paper 003 §9's training recipe for OT attention: half of the time, an example's template set also
// holds the templates of a random other training example of the same class ("images of the same class
// consist of visually similar patches"). The sampler draws among the examples it is given — one split's,
// so never across splits — and only within a class.
#pragma once

#include <cstdint>
#include <map>
#include <vector>

#include "base/rng.h"

namespace hnas::data {

class SameClassSampler {
public:
    // labels: the class of each example; probability: that an example gets a partner at all, in [0, 1].
    SameClassSampler(const std::vector<int32_t>& labels, double probability);

    // With `probability`, another example of `example`'s class, uniformly; otherwise, or when the class
    // has no other example, −1.
    int64_t draw(int64_t example, Rng& rng) const;

private:
    std::vector<int32_t> labels_;
    std::map<int32_t, std::vector<int64_t>> members_;  // class → its examples, ascending
    double probability_;
};

}  // namespace hnas::data
