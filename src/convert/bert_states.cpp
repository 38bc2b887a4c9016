#include "convert/bert_states.h"

#include <algorithm>

#include "autograd/variable.h"
#include "backend/matmul.h"
#include "base/check.h"
#include "data/tokenizer.h"
#include "io/safetensors.h"
#include "ops/ops.h"
#include "tasks/task_support.h"

namespace hnas::convert {

std::vector<Tensor> bert_hidden_states(const models::BertModel& model, const Tensor& input_ids, const Tensor& segment_ids,
                                       const Tensor& valid) {
    HNAS_CHECK(input_ids.rank() == 2, "hidden states: ids must be (B, L), got ", shape_str(input_ids.shape()));
    HNAS_CHECK(input_ids.dim(1) <= model.config().max_source_positions, "hidden states: ", input_ids.dim(1),
               " tokens exceed the model's ", model.config().max_source_positions, " positions");
    NoGradScope no_grad;
    std::vector<Tensor> states;
    for (const Var& state : model.hidden_states(input_ids, segment_ids, valid)) states.push_back(state.value());
    return states;
}

void write_hidden_states(const std::string& checkpoint, const std::vector<std::string>& lines, const HiddenStatesOptions& options,
                         const std::string& out) {
    HNAS_CHECK(options.batch >= 1, "hidden-states: the batch must be >= 1, got ", options.batch);
    const backend::MatmulPrecision precision = options.precision;
    const tasks::TrainedCheckpoint trained = tasks::read_trained_checkpoint(checkpoint);
    HNAS_CHECK(trained.config.model.architecture == models::Architecture::bert, "hidden-states: ", checkpoint,
               " is not a BERT-style checkpoint (masked LM, classify or span)");
    const tasks::LoadedModel<models::BertModel> loaded = tasks::load_model<models::BertModel>(trained);
    const models::BertModel* model = loaded.model.get();
    const std::vector<int64_t>& rows = trained.tokenizer.source_rows();
    const auto longest = static_cast<size_t>(trained.config.model.max_source_positions - 2);
    std::vector<std::vector<int32_t>> sequences;
    for (const std::string& line : lines) {
        std::vector<int32_t> ids = trained.tokenizer.encode(line);
        if (ids.size() > longest) ids.resize(longest);
        ids.insert(ids.begin(), data::kClsId);
        ids.push_back(data::kSepId);
        sequences.push_back(std::move(ids));
    }
    const auto count = static_cast<int64_t>(sequences.size());
    const int64_t width = trained.config.model.width, layers = trained.config.model.encoder_layers;
    int64_t total = 0;
    std::vector<float> lengths, input_rows;
    for (const auto& ids : sequences) {
        lengths.push_back(static_cast<float>(ids.size()));
        total += static_cast<int64_t>(ids.size());
        for (const int32_t id : ids) {
            const int64_t row = rows.empty() ? id : rows[static_cast<size_t>(id)];
            input_rows.push_back(static_cast<float>(row));
        }
    }
    std::vector<std::vector<float>> hidden(static_cast<size_t>(layers + 1));
    std::vector<float> pooled;
    const backend::MatmulPrecision before = backend::matmul_precision();
    backend::set_matmul_precision(precision);
    for (int64_t start = 0; start < count; start += options.batch) {
        const int64_t end = std::min(count, start + options.batch), b = end - start;
        size_t length = 0;
        for (int64_t n = start; n < end; ++n) length = std::max(length, sequences[static_cast<size_t>(n)].size());
        const auto l = static_cast<int64_t>(length);
        std::vector<int32_t> ids(static_cast<size_t>(b * l), data::kPadId), segments(static_cast<size_t>(b * l), 0);
        std::vector<float> valid(static_cast<size_t>(b * l), 0.0f);
        for (int64_t n = 0; n < b; ++n) {
            const auto& sequence = sequences[static_cast<size_t>(start + n)];
            for (size_t t = 0; t < sequence.size(); ++t) {
                ids[static_cast<size_t>(n * l) + t] = sequence[t];
                valid[static_cast<size_t>(n * l) + t] = 1.0f;
            }
        }
        const std::vector<Tensor> states = bert_hidden_states(*model, Tensor::from_ints({b, l}, ids), Tensor::from_ints({b, l}, segments),
                                                              Tensor::from_floats({b, l}, valid));
        for (size_t k = 0; k < states.size(); ++k) {
            const float* data = states[k].data();
            for (int64_t n = 0; n < b; ++n) {
                const auto real = static_cast<int64_t>(sequences[static_cast<size_t>(start + n)].size());
                hidden[k].insert(hidden[k].end(), data + n * l * width, data + (n * l + real) * width);
                if (k + 1 == states.size()) {
                    for (int64_t d = 0; d < width; ++d) {
                        double sum = 0.0;
                        for (int64_t t = 0; t < real; ++t) sum += data[(n * l + t) * width + d];
                        pooled.push_back(static_cast<float>(sum / static_cast<double>(real)));
                    }
                }
            }
        }
    }
    backend::set_matmul_precision(before);
    io::SafeTensors file;
    file.tensors.emplace("lengths", Tensor::from_floats({count}, lengths));
    file.tensors.emplace("input_ids", Tensor::from_floats({total}, input_rows));
    for (size_t k = 0; k < hidden.size(); ++k) {
        file.tensors.emplace("hidden." + std::to_string(k), Tensor::from_floats({total, width}, hidden[k]));
    }
    file.tensors.emplace("mean_pooled", Tensor::from_floats({count, width}, pooled));
    file.metadata = {{"checkpoint", checkpoint},
                     {"batch", std::to_string(options.batch)},
                     {"precision", name_of(options.precision)},
                     {"layers", std::to_string(layers)}};
    io::write_safetensors(out, file);
}

}  // namespace hnas::convert
