#include "data/same_class_sampler.h"

#include <algorithm>

#include "base/check.h"

namespace hnas::data {

SameClassSampler::SameClassSampler(const std::vector<int32_t>& labels, double probability)
    : labels_(labels), probability_(probability) {
    HNAS_CHECK(probability >= 0.0 && probability <= 1.0, "same-class sampler: probability ", probability, " is not in [0, 1]");
    for (size_t example = 0; example < labels_.size(); ++example) members_[labels_[example]].push_back(static_cast<int64_t>(example));
}

int64_t SameClassSampler::draw(int64_t example, Rng& rng) const {
    HNAS_CHECK(example >= 0 && example < static_cast<int64_t>(labels_.size()), "same-class sampler: example ", example,
               " of ", labels_.size());
    if (rng.uniform() >= probability_) return -1;
    const std::vector<int64_t>& members = members_.at(labels_[static_cast<size_t>(example)]);
    if (members.size() < 2) return -1;
    // uniform over the class without `example`: draw among the others and step past it
    const auto self = static_cast<uint64_t>(std::lower_bound(members.begin(), members.end(), example) - members.begin());
    uint64_t pick = rng.below(members.size() - 1);
    if (pick >= self) ++pick;
    return members[pick];
}

}  // namespace hnas::data
