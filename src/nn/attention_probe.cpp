#include "nn/attention_probe.h"

#include <algorithm>

#include "base/check.h"

namespace hnas::nn {

namespace {
// The innermost open probe of this thread: forward passes run on the thread that opened it.
thread_local AttentionProbe* open_probe = nullptr;
}  // namespace

AttentionProbe::AttentionProbe(std::vector<const MultiHeadAttention*> watched)
    : watched_(std::move(watched)), records_(watched_.size()), enclosing_(open_probe) {
    open_probe = this;
}

AttentionProbe::~AttentionProbe() { open_probe = enclosing_; }

const AttentionRecord& AttentionProbe::record(const MultiHeadAttention& attention) const {
    const auto found = std::find(watched_.begin(), watched_.end(), &attention);
    HNAS_CHECK(found != watched_.end(), "attention probe: asked for an attention it does not watch");
    const AttentionRecord& record = records_[static_cast<size_t>(found - watched_.begin())];
    HNAS_CHECK(record.key_weight_sums.defined(), "attention probe: the attention ran no forward pass while the probe was open");
    return record;
}

AttentionRecord* AttentionProbe::slot_for(const MultiHeadAttention& attention) {
    if (open_probe == nullptr) return nullptr;
    const auto found = std::find(open_probe->watched_.begin(), open_probe->watched_.end(), &attention);
    return found == open_probe->watched_.end() ? nullptr
                                               : &open_probe->records_[static_cast<size_t>(found - open_probe->watched_.begin())];
}

}  // namespace hnas::nn
