#include "models/model_factory.h"

#include <cctype>
#include <map>

#include "models/bert.h"
#include "models/multiview.h"
#include "models/seq2seq.h"
#include "models/symbol_encoder.h"
#include "models/vit.h"

namespace hnas::models {

std::unique_ptr<Model> build_model(const ModelConfig& config, Rng& init_rng, Rng& dropout_rng) {
    const bool reads_tokens = config.architecture != Architecture::multiview && config.architecture != Architecture::vit;
    HNAS_CHECK(!reads_tokens || config.vocab_size > 0, "model: vocab_size is 0; set model.vocab_size or build the model after ",
               "the tokenizer has given it");
    switch (config.architecture) {
    case Architecture::seq2seq: return std::make_unique<Seq2SeqModel>(config, init_rng, dropout_rng);
    case Architecture::bert: return std::make_unique<BertModel>(config, init_rng, dropout_rng);
    case Architecture::symbols: return std::make_unique<SymbolEncoder>(config, init_rng, dropout_rng);
    case Architecture::multiview: return std::make_unique<MultiviewModel>(config, init_rng, dropout_rng);
    case Architecture::vit: return std::make_unique<VitModel>(config, init_rng, dropout_rng);
    }
    throw Error("model: unknown architecture");
}

std::vector<std::pair<std::string, int64_t>> group_parameter_counts(
    const std::vector<std::pair<std::string, int64_t>>& parameters) {
    // "encoder.layers.11.ffn.fc1.weight" -> "encoder.layers.*.ffn.fc1.weight"
    auto fold_layer_indices = [](const std::string& name) {
        std::string folded;
        const std::string marker = ".layers.";
        size_t at = 0;
        for (size_t found; (found = name.find(marker, at)) != std::string::npos;) {
            size_t end = found + marker.size();
            while (end < name.size() && std::isdigit(static_cast<unsigned char>(name[end]))) ++end;
            folded += name.substr(at, found - at) + (end > found + marker.size() ? ".layers.*" : marker);
            at = end;
        }
        return folded + name.substr(at);
    };
    std::vector<std::pair<std::string, int64_t>> groups;
    std::map<std::string, size_t> position;
    for (const auto& [name, count] : parameters) {
        std::string group = fold_layer_indices(name);
        group = group.substr(0, group.rfind('.'));  // drop "weight", "bias", ...
        // Keep at most the module one level below a layer: "encoder.layers.*.self_attn".
        const size_t layers = group.find(".layers.*.");
        if (layers != std::string::npos) {
            const size_t end = group.find('.', layers + 10);
            if (end != std::string::npos) group = group.substr(0, end);
        }
        auto [it, inserted] = position.emplace(group, groups.size());
        if (inserted) groups.emplace_back(group, 0);
        groups[it->second].second += count;
    }
    return groups;
}

}  // namespace hnas::models
