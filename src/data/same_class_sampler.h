// Paper 003 §9's training recipe for OT attention: half of the time, an example's template set also
// holds the templates of a random other training example of the same class ("images of the same class
// consist of visually similar patches"). The sampler draws among the examples it is given — one split's,
// so never across splits — and only within a class.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "base/rng.h"
#include "data/batching.h"

namespace hnas::data {

class SameClassSampler {
public:
    // labels: the class of each example; probability: that an example gets a partner at all, in [0, 1].
    SameClassSampler(const std::vector<int32_t>& labels, double probability);

    // With `probability`, another example of `example`'s class, uniformly; otherwise, or when the class
    // has no other example, −1.
    int64_t draw(int64_t example, Rng& rng) const;
    // A partner (or −1) for each example of the batch at `at` (its position before it was taken): drawn
    // from (seed, at) alone, so a resumed run draws what an uninterrupted one does.
    std::vector<int64_t> draw_batch(const std::vector<uint32_t>& examples, uint64_t seed, const DataPosition& at) const;

private:
    std::vector<int32_t> labels_;
    std::map<int32_t, std::vector<int64_t>> members_;  // class → its examples, ascending
    double probability_;
};

// A batch's examples followed by its rows' partners (those ≠ −1), and for each of those rows the row of
// its partner (−1: none; the partner rows have none): what a batcher builds the partnered batch from.
// `what` names the data in the error for a partner outside its `examples`.
struct PartnerRows {
    std::vector<uint32_t> examples;
    std::vector<int64_t> partner_row;
};
PartnerRows append_partner_rows(const std::vector<int64_t>& example_index, const std::vector<int64_t>& template_partner,
                                int64_t examples, const std::string& what);

}  // namespace hnas::data
