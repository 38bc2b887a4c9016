// What an analysis reads of attentions, without the layers keeping anything for it: the analysis opens
// a probe on the attentions it watches and runs its forward passes; while the probe is open, each watched
// attention hands it what its last forward pass computed. Closing the probe (its destructor) ends the
// recording; a layer that no probe watches does no extra work.
#pragma once

#include <vector>

#include "tensor/tensor.h"

namespace hnas::nn {

class MultiHeadAttention;

// One forward pass of one attention, as the analyses read it.
struct AttentionRecord {
    // Σ_i A_ij over the real queries for every key, (B, H, Tk): the explaining-away statistic.
    Tensor key_weight_sums;
    Tensor key_valid;  // (B, Tk) of 1 real / 0 padding; undefined: every key was real
    // What paper 003's dual analysis rebuilds the weights from (analysis/dual_deviation.h): the query and
    // memory inputs, (B, Tq, D) and (B, Tk, D), and the priors' log u broadcast to (B, H, Tq, Tk) over
    // the memory's keys (undefined without priors).
    Tensor query, memory, log_preference;
};

class AttentionProbe {
public:
    // Opens the probe on this thread for `watched`; probes nest, the innermost one records.
    explicit AttentionProbe(std::vector<const MultiHeadAttention*> watched);
    ~AttentionProbe();
    AttentionProbe(const AttentionProbe&) = delete;
    AttentionProbe& operator=(const AttentionProbe&) = delete;

    // What `attention` computed in its last forward pass while the probe was open; throws when it ran
    // none or is not watched.
    const AttentionRecord& record(const MultiHeadAttention& attention) const;

    // For MultiHeadAttention: the open probe's slot for `attention`, or null when no open probe watches it.
    static AttentionRecord* slot_for(const MultiHeadAttention& attention);

private:
    std::vector<const MultiHeadAttention*> watched_;
    std::vector<AttentionRecord> records_;  // one per watched attention
    AttentionProbe* enclosing_;
};

}  // namespace hnas::nn
