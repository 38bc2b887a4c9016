#include "nn/attention_intervention.h"

#include "nn/attention.h"

namespace hnas::nn {

namespace {
// The innermost open intervention of this thread: forward passes run on the thread that opened it.
thread_local AttentionIntervention* open_intervention = nullptr;
}  // namespace

AttentionIntervention::AttentionIntervention(Change change) : change_(std::move(change)), enclosing_(open_intervention) {
    open_intervention = this;
}

AttentionIntervention::~AttentionIntervention() { open_intervention = enclosing_; }

const AttentionIntervention::Change* AttentionIntervention::change_for(const MultiHeadAttention& attention) {
    if (open_intervention == nullptr || attention.role() != AttentionRole::bidirectional || attention.compares_templates()) {
        return nullptr;
    }
    return &open_intervention->change_;
}

}  // namespace hnas::nn
