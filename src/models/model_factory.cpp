#include "models/model_factory.h"

#include <cctype>
#include <map>

#include "models/bert.h"
#include "models/seq2seq.h"

namespace hnas::models {

std::unique_ptr<nn::Module> build_model(const ModelConfig& config, Rng& init_rng, Rng& dropout_rng) {
    HNAS_CHECK(config.vocab_size > 0, "model: vocab_size is 0; set model.vocab_size or build the model after the ",
               "tokenizer has given it");
    if (config.architecture == Architecture::seq2seq) return std::make_unique<Seq2SeqModel>(config, init_rng, dropout_rng);
    return std::make_unique<BertModel>(config, init_rng, dropout_rng);
}

std::vector<std::pair<std::string, nn::MultiHeadAttention*>> named_attentions(nn::Module& model) {
    std::vector<std::pair<std::string, nn::MultiHeadAttention*>> out;
    auto add_stack = [&](const std::string& stack, const std::vector<nn::TransformerLayer*>& layers) {
        for (size_t i = 0; i < layers.size(); ++i) {
            const std::string prefix = stack + ".layers." + std::to_string(i);
            out.emplace_back(prefix + ".self_attn", &layers[i]->self_attention());
            if (layers[i]->cross_attention()) out.emplace_back(prefix + ".cross_attn", layers[i]->cross_attention());
        }
    };
    if (auto* seq2seq = dynamic_cast<Seq2SeqModel*>(&model)) {
        add_stack("encoder", seq2seq->encoder_layers());
        add_stack("decoder", seq2seq->decoder_layers());
    } else {
        auto* bert = dynamic_cast<BertModel*>(&model);
        HNAS_CHECK(bert, "named_attentions: neither a seq2seq nor a BERT model");
        add_stack("encoder", bert->encoder_layers());
    }
    return out;
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
