// Paper 003 §7's context-dependent preference: "the function that outputs the template's preference
// weights [T5's: masks and relative positions] could also be generalized to factor in the input
// sentence contexts, and the output weights encode the importance of each word". Per head h, a
// log-weight for every key j from the key's input x_j and the mean s of the sequence's real inputs:
//   log u_hj = w_h · tanh(W_key x_j + b + W_context s),
// added to the scores before any normalization (Eq. 18's u; for ot, its preference). w starts at zero,
// so u starts uniform and a model with the prior starts as one without it.
#pragma once

#include "nn/layers.h"

namespace hnas::nn {

struct ContextPreferenceOptions {
    int64_t hidden = 32;  // the width of tanh's layer
};

class ContextPreference : public Module {
public:
    ContextPreference(int64_t width, int64_t heads, const ContextPreferenceOptions& options, Rng& init_rng);
    // memory (B, Tk, D) and its key_valid (B, Tk) (undefined: every key real) -> log u (B, H, 1, Tk),
    // the same for every query; padded keys get a value too, which the mask then ignores.
    Var forward(const Var& memory, const Tensor& key_valid) const;

private:
    int64_t heads_;
    const Linear& key_proj_;      // W_key, b
    const Linear& context_proj_;  // W_context
    Var head_weights_;            // w, (H, hidden), zero at the start
};

}  // namespace hnas::nn
