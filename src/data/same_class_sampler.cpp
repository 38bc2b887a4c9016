#include "data/same_class_sampler.h"

#include <algorithm>

#include "base/check.h"

namespace hnas::data {

namespace {
constexpr uint64_t kPartnerStream = 0x0703'0009;  // purpose of the template partners' stream (batching.h)
}  // namespace

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

PartnerRows append_partner_rows(const std::vector<int64_t>& example_index, const std::vector<int64_t>& template_partner,
                                int64_t examples, const std::string& what) {
    HNAS_CHECK(template_partner.size() == example_index.size(), what, ": a batch of ", example_index.size(), " rows with ",
               template_partner.size(), " template partners");
    PartnerRows out;
    out.examples.assign(example_index.begin(), example_index.end());
    for (int64_t partner : template_partner) {
        HNAS_CHECK(partner >= -1 && partner < examples, what, ": template partner ", partner, " is not one of its ", examples,
                   " examples");
        out.partner_row.push_back(partner < 0 ? -1 : static_cast<int64_t>(out.examples.size()));
        if (partner >= 0) out.examples.push_back(static_cast<uint32_t>(partner));
    }
    out.partner_row.resize(out.examples.size(), -1);
    return out;
}

std::vector<int64_t> SameClassSampler::draw_batch(const std::vector<uint32_t>& examples, uint64_t seed, const DataPosition& at) const {
    Rng rng = derive_rng(seed, kPartnerStream, static_cast<uint64_t>(at.epoch), static_cast<uint64_t>(at.batch));
    std::vector<int64_t> partners;
    for (uint32_t example : examples) partners.push_back(draw(example, rng));
    return partners;
}

}  // namespace hnas::data
