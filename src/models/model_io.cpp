#include "models/model_io.h"

#include <algorithm>
#include <cstring>
#include <map>
#include <set>

namespace hnas::models {

void add_parameters(io::CheckpointWriter& writer, const nn::Module& module, const std::string& prefix) {
    for (const auto& named : module.named_parameters()) writer.add_tensor(prefix + named.name, named.parameter.value());
}

void load_parameters(const io::Checkpoint& checkpoint, nn::Module& module, const std::string& prefix) {
    for (auto& named : module.named_parameters()) {
        const Tensor stored = checkpoint.tensor(prefix + named.name, named.parameter.shape());
        std::memcpy(named.parameter.value().data(), stored.data(), static_cast<size_t>(stored.numel()) * sizeof(float));
    }
}

namespace {

// The BERT tensor feeding seq2seq parameter `target`, or "" when it has none.
std::string bert_source(const std::string& target) {
    auto starts = [&](const std::string& head) { return target.rfind(head, 0) == 0; };
    if (target == "embedding.weight") return "embeddings.tokens.weight";
    if (target == "encoder.relative_bias.weight") return target;  // the encoder's shared prior (T5)
    if (target == "encoder.positions.weight" || target == "decoder.positions.weight") return "embeddings.positions.weight";
    if (starts("encoder.norm.") || starts("decoder.norm.")) return "embeddings.norm." + target.substr(target.find(".norm.") + 6);
    // Pre-norm stacks end in a layer norm: BERT's feeds its heads, as the decoder's feeds the output projection.
    if (starts("encoder.final_norm.") || starts("decoder.final_norm.")) {
        return "encoder.final_norm." + target.substr(target.find(".final_norm.") + 12);
    }
    for (const char* stack : {"encoder.layers.", "decoder.layers."}) {
        if (!starts(stack)) continue;
        const std::string rest = target.substr(std::strlen(stack));  // "N.self_attn.q_proj.weight"
        const std::string inner = rest.substr(rest.find('.') + 1);
        if (inner.rfind("cross_attn", 0) == 0) return "";
        return "encoder.layers." + rest;
    }
    return "";
}

// The checkpoint's parameters (dotted paths under `prefix`) that `used` does not hold; other state
// (optimizer moments, "optimizer/m/...") is not a parameter.
std::vector<std::string> unused_parameters(const io::Checkpoint& checkpoint, const std::string& prefix,
                                           const std::set<std::string>& used) {
    std::vector<std::string> unused;
    for (const auto& entry : checkpoint.entries()) {
        if (entry.name.rfind(prefix, 0) == 0 && entry.type == io::EntryType::f32 && entry.name.find('/') == std::string::npos &&
            !used.count(entry.name)) {
            unused.push_back(entry.name);
        }
    }
    return unused;
}

}  // namespace

InitReport initialize_by_name(const io::Checkpoint& checkpoint, nn::Module& module) {
    InitReport report;
    std::set<std::string> used;
    for (auto& named : module.named_parameters()) {
        if (!checkpoint.has(named.name)) {
            report.fresh.push_back(named.name);
            continue;
        }
        const Tensor stored = checkpoint.tensor(named.name);
        Tensor& target = named.parameter.value();
        HNAS_CHECK(stored.shape() == target.shape(), "init_from ", checkpoint.path(), ": ", named.name, " has shape ",
                   shape_str(stored.shape()), " but the model needs ", shape_str(target.shape()));
        std::memcpy(target.data(), stored.data(), static_cast<size_t>(target.numel()) * sizeof(float));
        report.mapped.emplace_back(named.name, named.name);
        used.insert(named.name);
    }
    report.unused = unused_parameters(checkpoint, "", used);
    HNAS_CHECK(!report.mapped.empty(), "init_from ", checkpoint.path(), ": it holds no parameter of this model");
    return report;
}

void check_init_architecture(const ModelConfig& pretrained, const ModelConfig& model, const std::string& path) {
    auto same = [&](const char* key, const auto& stored, const auto& wanted) {
        HNAS_CHECK(stored == wanted, "init_from ", path, ": its model has ", key, " ", stored, ", this run's ", wanted,
                   "; set ", key, " to ", stored, " to start from it");
    };
    auto same_choice = [&](const char* key, auto stored, auto wanted) {
        same(key, std::string(name_of(stored)), std::string(name_of(wanted)));
    };
    same("model.heads", pretrained.heads, model.heads);
    same_choice("model.norm", pretrained.norm, model.norm);
    same_choice("model.activation", pretrained.activation, model.activation);
    same_choice("model.positions", pretrained.positions, model.positions);
    same_choice("model.mixer", pretrained.mixer, model.mixer);
    same("model.layer_norm_eps", pretrained.layer_norm_eps, model.layer_norm_eps);
    // A seq2seq model started from an MLM encoder counts the encoder's layers itself (initialize_from_bert).
    if (pretrained.architecture != model.architecture) return;
    auto no_more_than = [&](const char* key, int64_t stored, int64_t wanted) {
        HNAS_CHECK(wanted <= stored, "init_from ", path, ": its model has ", key, " ", stored, ", this run's ", wanted,
                   "; set ", key, " to at most ", stored, " (a layer it lacks would start random)");
    };
    no_more_than("model.encoder_layers", pretrained.encoder_layers, model.encoder_layers);
    if (model.architecture == Architecture::seq2seq) no_more_than("model.decoder_layers", pretrained.decoder_layers, model.decoder_layers);
}

InitReport initialize_from_bert(const io::Checkpoint& bert, Seq2SeqModel& model, const std::string& prefix) {
    // Every seq2seq layer needs a BERT layer to start from.
    int64_t bert_layers = 0;
    const std::string layer_head = prefix + "encoder.layers.";
    for (const auto& entry : bert.entries()) {
        if (entry.name.rfind(layer_head, 0) != 0) continue;
        bert_layers = std::max<int64_t>(bert_layers, std::stoll(entry.name.substr(layer_head.size())) + 1);
    }
    const ModelConfig& config = model.config();
    // BERT's embeddings are unscaled and normalized; other embeddings would misread its tables.
    HNAS_CHECK(config.embedding_norm && !config.scale_embeddings, "init_from ", bert.path(),
               ": a BERT encoder needs model.embedding_norm true and model.scale_embeddings false (they are ",
               config.embedding_norm ? "true" : "false", " and ", config.scale_embeddings ? "true" : "false", ")");
    HNAS_CHECK(config.encoder_layers <= bert_layers && config.decoder_layers <= bert_layers, "init_from ", bert.path(),
               ": the MLM checkpoint has ", bert_layers, " layers, the seq2seq model ", config.encoder_layers,
               " encoder and ", config.decoder_layers, " decoder layers");
    InitReport report;
    std::set<std::string> used;
    for (auto& named : model.named_parameters()) {
        const std::string source = bert_source(named.name);
        if (source.empty() || !bert.has(prefix + source)) {
            report.fresh.push_back(named.name);
            continue;
        }
        const Tensor stored = bert.tensor(prefix + source);
        Tensor& target = named.parameter.value();
        const bool positions = source == "embeddings.positions.weight";
        // Position tables may be longer in BERT: the first rows serve the shorter seq2seq tables.
        const bool fits = positions ? stored.rank() == 2 && target.rank() == 2 && stored.dim(1) == target.dim(1) &&
                                          stored.dim(0) >= target.dim(0)
                                    : stored.shape() == target.shape();
        HNAS_CHECK(fits, "init_from ", bert.path(), ": ", prefix + source, " has shape ", shape_str(stored.shape()),
                   " but ", named.name, " needs ", shape_str(target.shape()),
                   positions ? " (at least as many positions, same width)" : "");
        std::memcpy(target.data(), stored.data(), static_cast<size_t>(target.numel()) * sizeof(float));
        report.mapped.emplace_back(prefix + source, named.name);
        used.insert(prefix + source);
    }
    report.unused = unused_parameters(bert, prefix, used);
    HNAS_CHECK(!report.mapped.empty(), "init_from ", bert.path(), ": no parameter of the seq2seq model was found in it");
    return report;
}

}  // namespace hnas::models
