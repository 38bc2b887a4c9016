#include "decode/greedy.h"

#include <algorithm>

namespace hnas::decode {

std::vector<std::vector<int32_t>> greedy_decode(const models::Seq2SeqModel& model, const Tensor& source_ids,
                                                const Tensor& source_valid, int64_t max_length, int32_t bos_id,
                                                int32_t eos_id) {
    NoGradScope no_grad;
    const int64_t batch = source_ids.dim(0), vocabulary = model.config().vocab_size;
    const int64_t limit = std::min(max_length, model.config().max_target_positions);
    const Var memory = model.encode(source_ids, source_valid);
    std::vector<std::vector<int32_t>> outputs(static_cast<size_t>(batch));
    std::vector<bool> finished(static_cast<size_t>(batch), false);
    std::vector<int32_t> prefix(static_cast<size_t>(batch), bos_id);  // (B, t) row-major, grows by a column
    for (int64_t t = 1; t <= limit; ++t) {
        const Tensor input = Tensor::from_ints({batch, t}, prefix);
        const Tensor valid = Tensor::full({batch, t}, 1.0f);
        const Tensor logits = model.logits(model.decode(memory, source_valid, input, valid)).value();  // (B·t, V)
        std::vector<int32_t> next_prefix;
        for (int64_t b = 0; b < batch; ++b) {
            const float* row = logits.data() + ((b + 1) * t - 1) * vocabulary;  // the last position of row b
            const auto best = static_cast<int32_t>(std::max_element(row, row + vocabulary) - row);
            if (!finished[static_cast<size_t>(b)]) {
                if (best == eos_id) {
                    finished[static_cast<size_t>(b)] = true;
                } else {
                    outputs[static_cast<size_t>(b)].push_back(best);
                }
            }
            next_prefix.insert(next_prefix.end(), prefix.begin() + b * t, prefix.begin() + (b + 1) * t);
            next_prefix.push_back(best);
        }
        prefix.swap(next_prefix);
        if (std::all_of(finished.begin(), finished.end(), [](bool done) { return done; })) break;
    }
    return outputs;
}

}  // namespace hnas::decode
