#include "nn/context_preference.h"

#include <algorithm>

namespace hnas::nn {

ContextPreference::ContextPreference(int64_t width, int64_t heads, const ContextPreferenceOptions& options, Rng& init_rng)
    : heads_(heads),
      key_proj_(register_module("key_proj", std::make_unique<Linear>(width, options.hidden, init_rng))),
      context_proj_(register_module("context_proj", std::make_unique<Linear>(width, options.hidden, init_rng, false))),
      head_weights_(register_parameter("head_weights", Tensor::zeros({heads, options.hidden}))) {}

Var ContextPreference::forward(const Var& memory, const Tensor& key_valid) const {
    HNAS_CHECK(memory.rank() == 3 && (!key_valid.defined() || key_valid.shape() == (Shape{memory.dim(0), memory.dim(1)})),
               "context preference: memory ", shape_str(memory.shape()), " and key_valid ",
               key_valid.defined() ? shape_str(key_valid.shape()) : std::string("(all real)"), " must be (B, Tk, D) and (B, Tk)");
    const int64_t batch = memory.dim(0), keys = memory.dim(1);
    const Tensor real = key_valid.defined() ? key_valid : Tensor::full({batch, keys}, 1.0f);
    Tensor count = Tensor::empty({batch, 1, 1});
    for (int64_t b = 0; b < batch; ++b) {
        float n = 0.0f;
        for (int64_t t = 0; t < keys; ++t) n += real.data()[b * keys + t];
        count.data()[b] = std::max(n, 1.0f);  // a row without real keys has no weights to shape
    }
    const Var summary = ops::div(ops::sum(ops::mul(memory, Var(real.reshape({batch, keys, 1}))), 1, true), Var(count));  // (B, 1, D)
    const Var hidden = ops::tanh(ops::add(key_proj_.forward(memory), context_proj_.forward(summary)));  // (B, Tk, hidden)
    const Var per_head = ops::matmul(hidden, head_weights_, false, true);                                  // (B, Tk, H)
    return ops::reshape(ops::permute(per_head, {0, 2, 1}), {batch, heads_, 1, keys});
}

}  // namespace hnas::nn
