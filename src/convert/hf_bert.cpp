#include "convert/hf_bert.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <map>
#include <set>

#include "base/atomic_file.h"
#include "config/experiment_config.h"
#include "tasks/task.h"
#include "tasks/trained_model.h"
#include "io/checkpoint.h"
#include "io/safetensors.h"
#include "models/bert.h"
#include "models/model_io.h"

namespace hnas::convert {

namespace fs = std::filesystem;

namespace {

constexpr const char* kWordEmbeddings = "bert.embeddings.word_embeddings.weight";
constexpr const char* kMlmBias = "cls.predictions.bias";

// Parameters whose rows are vocabulary pieces.
bool has_vocabulary_rows(const std::string& hnas_name) { return hnas_name == "embeddings.tokens.weight" || hnas_name == "mlm_head.bias"; }

// The file's tensor for a Hugging Face name: with or without the "bert." prefix (BertModel files lack
// it), and LayerNorm's older gamma/beta names.
const std::pair<const std::string, Tensor>* find_tensor(const io::SafeTensors& file, const std::string& name) {
    std::vector<std::string> candidates{name};
    if (name.rfind("bert.", 0) == 0) candidates.push_back(name.substr(5));
    for (size_t i = 0, n = candidates.size(); i < n; ++i) {
        const std::string c = candidates[i];  // a copy: push_back may move the vector
        if (c.ends_with("LayerNorm.weight")) candidates.push_back(c.substr(0, c.size() - 6) + "gamma");
        if (c.ends_with("LayerNorm.bias")) candidates.push_back(c.substr(0, c.size() - 4) + "beta");
    }
    for (const std::string& candidate : candidates) {
        const auto found = file.tensors.find(candidate);
        if (found != file.tensors.end()) return &*found;
    }
    return nullptr;
}

// The encoder's layer count: the file must hold layers 0 … n−1 and no others, so a name cannot make
// hnas build more layers than the file has weights for.
int64_t count_layers(const io::SafeTensors& file, const std::string& path) {
    std::set<int64_t> layers;
    for (const auto& [name, tensor] : file.tensors) {
        const size_t at = name.find("encoder.layer.");
        if (at == std::string::npos) continue;
        const size_t digits = name.find_first_not_of("0123456789", at + 14);
        HNAS_CHECK(digits > at + 14 && digits <= at + 18 && digits < name.size() && name[digits] == '.', path, ": tensor ", name,
                   " has no layer number of at most 4 digits after encoder.layer.");
        layers.insert(std::stoll(name.substr(at + 14, digits - at - 14)));
    }
    HNAS_CHECK(layers.empty() || *layers.rbegin() + 1 == static_cast<int64_t>(layers.size()), path, ": the encoder's layers are numbered up to ",
               layers.empty() ? 0 : *layers.rbegin(), " but only ", layers.size(), " of them have tensors");
    return static_cast<int64_t>(layers.size());
}

// Refuses weights that are NaN or infinite, naming each tensor that holds any and how many: a file
// with them imports fine and fails at the first fine-tuning step, far from the cause.
void check_finite(const io::SafeTensors& file, const std::string& path) {
    std::string found;
    for (const auto& [name, tensor] : file.tensors) {
        const float* values = tensor.data();
        const auto bad = std::count_if(values, values + tensor.numel(), [](float v) { return !std::isfinite(v); });
        if (bad > 0) found += concat_message(found.empty() ? "" : ", ", name, " (", bad, " of ", tensor.numel(), ")");
    }
    HNAS_CHECK(found.empty(), "import-bert: ", path, " holds NaN or infinite weights in ", found,
               "; pass --allow-non-finite to import them as they are");
}

// A field of config.json: `valid` says whether the file's value is acceptable, `expected` what it must be.
template <typename T>
T config_field(const Json& hf, const char* key, T fallback, bool (*valid)(const Json&), const char* expected, const std::string& path) {
    if (!hf.contains(key)) return fallback;
    HNAS_CHECK(valid(hf.at(key)), "import-bert: ", path, ": ", key, " is ", hf.at(key).dump(), ", expected ", expected);
    return hf.at(key).get<T>();
}

const Tensor& required(const io::SafeTensors& file, const std::string& name, const std::string& path) {
    const auto* entry = find_tensor(file, name);
    HNAS_CHECK(entry != nullptr, path, ": no tensor ", name, " (a BERT checkpoint in Hugging Face's layout has one)");
    return entry->second;
}

// The masked-LM config of the file's model: its shape from the tensors, the heads and layer-norm ε from
// config.json (--config, else the one beside the weights).
Json imported_config(const ImportOptions& options, const io::SafeTensors& file, const Tensor& words) {
    std::string config_path = options.config;
    if (config_path.empty() && fs::exists(fs::path(options.weights).parent_path() / "config.json")) {
        config_path = (fs::path(options.weights).parent_path() / "config.json").string();
    }
    const Json hf = config_path.empty() ? Json::object() : config::read_json_file(config_path);
    HNAS_CHECK(hf.is_object(), "import-bert: ", config_path, " is not a JSON object (a BertConfig)");
    const auto positive_count = [](const Json& v) { return v.is_number_unsigned() && v.get<uint64_t>() > 0 && v.get<uint64_t>() <= 4096; };
    const auto positive_number = [](const Json& v) { return v.is_number() && v.get<double>() > 0; };
    const auto gelu = [](const Json& v) { return v == "gelu"; };
    const int64_t heads = config_field<int64_t>(hf, "num_attention_heads", options.heads, positive_count, "an integer in [1, 4096]", config_path);
    HNAS_CHECK(heads > 0, "import-bert: no config.json beside ", options.weights, " gives num_attention_heads; pass --config or --heads");
    const double eps = config_field<double>(hf, "layer_norm_eps", 1e-12, positive_number, "a positive number", config_path);
    (void)config_field<std::string>(hf, "hidden_act", "gelu", gelu, "\"gelu\" (hnas's BERT uses gelu with erf)", config_path);
    const bool sentence_order = find_tensor(file, "cls.seq_relationship.weight") != nullptr;
    return {
        {"task", "mlm"},
        {"model",
         {{"d_model", words.dim(1)},
          {"heads", heads},
          {"ffn_dim", required(file, "bert.encoder.layer.0.intermediate.dense.weight", options.weights).dim(0)},
          {"encoder_layers", count_layers(file, options.weights)},
          {"max_positions", required(file, "bert.embeddings.position_embeddings.weight", options.weights).dim(0)},
          {"segments", required(file, "bert.embeddings.token_type_embeddings.weight", options.weights).dim(0)},
          {"layer_norm_eps", eps},
          {"attention", {{"encoder", {{"kind", options.attention}}}}}}},
        {"tokenizer", {{"type", "wordpiece"}, {"model", options.vocab}}},
        {"train", {{"sentence_order_weight", sentence_order ? 1.0 : 0.0}}}};
}

// Row j of hnas's vocabulary is the file's row rows[j]; bos and eos copy [CLS] and [SEP].
void copy_vocabulary_rows(const Tensor& stored, const std::vector<int64_t>& rows, int64_t vocab_rows, const std::string& what,
                          Tensor& target) {
    const int64_t width = target.numel() / target.dim(0);
    HNAS_CHECK(stored.rank() >= 1 && vocab_rows > 0 && stored.dim(0) == vocab_rows && stored.numel() / vocab_rows == width, what,
               " has shape ", shape_str(stored.shape()), " for ", vocab_rows, " vocabulary rows of width ", width);
    for (int64_t j = 0; j < target.dim(0); ++j) {
        const int64_t source = rows[static_cast<size_t>(j)] >= 0 ? rows[static_cast<size_t>(j)]
                               : j == data::kBosId                  ? rows[data::kClsId]
                                                                   : rows[data::kSepId];
        std::memcpy(target.data() + j * width, stored.data() + source * width, static_cast<size_t>(width) * sizeof(float));
    }
}

// Each of the model's parameters from its tensor in the file; a head the file lacks starts fresh.
ImportReport copy_parameters(const io::SafeTensors& file, const std::vector<int64_t>& rows, int64_t vocab_rows,
                             const std::string& path, models::BertModel& model) {
    ImportReport report;
    std::set<std::string> used;
    for (auto& named : model.named_parameters()) {
        const std::string name = hugging_face_name(named.name);
        const auto* entry = name.empty() ? nullptr : find_tensor(file, name);
        if (entry == nullptr) {
            const bool head = named.name.rfind("encoder.", 0) != 0 && named.name.rfind("embeddings.", 0) != 0;
            HNAS_CHECK(head || name.empty(), path, ": no tensor ", name, " for ", named.name);
            report.fresh.push_back(named.name);
            continue;
        }
        used.insert(entry->first);
        const Tensor& stored = entry->second;
        Tensor& target = named.parameter.value();
        if (has_vocabulary_rows(named.name)) {
            copy_vocabulary_rows(stored, rows, vocab_rows, path + ": " + name, target);
        } else {
            HNAS_CHECK(stored.shape() == target.shape(), path, ": ", name, " has shape ", shape_str(stored.shape()), " but ",
                       named.name, " needs ", shape_str(target.shape()));
            std::memcpy(target.data(), stored.data(), static_cast<size_t>(target.numel()) * sizeof(float));
        }
        report.mapped.push_back(named.name);
    }
    for (const auto& [name, tensor] : file.tensors) {
        if (!used.count(name)) report.unused.push_back(name);
    }
    for (const auto& [name, dtype] : file.not_read) report.unused.push_back(name + " (" + dtype + ", not a weight)");
    return report;
}

}  // namespace

std::string hugging_face_name(const std::string& hnas_name) {
    static const std::map<std::string, std::string> fixed = {
        {"embeddings.tokens.weight", kWordEmbeddings},
        {"embeddings.positions.weight", "bert.embeddings.position_embeddings.weight"},
        {"embeddings.segments.weight", "bert.embeddings.token_type_embeddings.weight"},
        {"embeddings.norm.weight", "bert.embeddings.LayerNorm.weight"},
        {"embeddings.norm.bias", "bert.embeddings.LayerNorm.bias"},
        {"pooler.dense.weight", "bert.pooler.dense.weight"},
        {"pooler.dense.bias", "bert.pooler.dense.bias"},
        {"mlm_head.dense.weight", "cls.predictions.transform.dense.weight"},
        {"mlm_head.dense.bias", "cls.predictions.transform.dense.bias"},
        {"mlm_head.norm.weight", "cls.predictions.transform.LayerNorm.weight"},
        {"mlm_head.norm.bias", "cls.predictions.transform.LayerNorm.bias"},
        {"mlm_head.bias", kMlmBias},
        {"sop_head.weight", "cls.seq_relationship.weight"},
        {"sop_head.bias", "cls.seq_relationship.bias"}};
    if (const auto found = fixed.find(hnas_name); found != fixed.end()) return found->second;
    static const std::pair<const char*, const char*> layer_parts[] = {
        {"self_attn.q_proj.", "attention.self.query."}, {"self_attn.k_proj.", "attention.self.key."},
        {"self_attn.v_proj.", "attention.self.value."}, {"self_attn.out_proj.", "attention.output.dense."},
        {"self_attn_norm.", "attention.output.LayerNorm."}, {"ffn.fc1.", "intermediate.dense."},
        {"ffn.fc2.", "output.dense."},                   {"ffn_norm.", "output.LayerNorm."}};
    const std::string prefix = "encoder.layers.";
    if (hnas_name.rfind(prefix, 0) != 0) return "";
    const size_t dot = hnas_name.find('.', prefix.size());
    const std::string layer = hnas_name.substr(prefix.size(), dot - prefix.size()), rest = hnas_name.substr(dot + 1);
    for (const auto& [ours, theirs] : layer_parts) {
        const std::string part(ours);
        if (rest.rfind(part, 0) == 0 && (rest == part + "weight" || rest == part + "bias")) {
            return "bert.encoder.layer." + layer + "." + theirs + rest.substr(part.size());
        }
    }
    return "";
}

ImportReport import_bert(const ImportOptions& options) {
    const io::SafeTensors file = io::read_safetensors(options.weights);
    if (!options.allow_non_finite) check_finite(file, options.weights);
    const data::Tokenizer tokenizer = data::Tokenizer::load_wordpiece(options.vocab);
    const std::vector<int64_t>& rows = tokenizer.source_rows();
    const int64_t vocab_rows = static_cast<int64_t>(std::count_if(rows.begin(), rows.end(), [](int64_t r) { return r >= 0; }));

    const Tensor& words = required(file, kWordEmbeddings, options.weights);
    HNAS_CHECK(words.rank() == 2 && words.dim(0) == vocab_rows, options.weights, ": the word embeddings have shape ",
               shape_str(words.shape()), " but ", options.vocab, " has ", vocab_rows, " pieces");
    config::ExperimentConfig config = tasks::parse_config(imported_config(options, file, words));
    config.model.vocab_size = tokenizer.vocab_size();
    Rng init_rng(config.seed, 1), dropout_rng(config.seed, 2);
    models::BertModel model(config.model, init_rng, dropout_rng);

    const ImportReport report = copy_parameters(file, rows, vocab_rows, options.weights, model);
    Json metadata = {{"hnas_version", HNAS_VERSION}, {"config", config.resolved}, {"vocab_size", tokenizer.vocab_size()},
                     {"step", 0},                    {"imported_from", options.weights}};
    io::CheckpointWriter writer(metadata);
    models::add_parameters(writer, model);
    writer.add_bytes("tokenizer.model", tokenizer.serialized_model());
    writer.write(options.out);
    return report;
}

void export_bert(const std::string& checkpoint_path, const std::string& out_dir) {
    const tasks::TrainedCheckpoint trained = tasks::read_trained_checkpoint(checkpoint_path);
    const models::ModelConfig& model = trained.config.model;
    HNAS_CHECK(model.architecture == models::Architecture::bert, "export: ", checkpoint_path, " holds a ",
               trained.config.task->name, " model (encoder-decoder); export writes BERT-style models");
    HNAS_CHECK(model.activation == nn::Activation::gelu && model.norm == nn::NormPlacement::post && model.positions == models::PositionEncoding::learned,
               "export: ", checkpoint_path, ": Hugging Face's BERT is post-LN with GELU and learned positions; this model has ",
               "model.norm, model.activation or model.positions set otherwise");
    const std::vector<int64_t>& rows = trained.tokenizer.source_rows();
    io::SafeTensors out;
    for (const io::EntryInfo& entry : trained.checkpoint.entries()) {
        if (entry.type != io::EntryType::f32 || entry.name.find('/') != std::string::npos) continue;  // parameters only
        Tensor tensor = trained.checkpoint.tensor(entry.name);
        const std::string name = hugging_face_name(entry.name);
        if (has_vocabulary_rows(entry.name) && !rows.empty()) {
            // Back to vocab.txt order, without the pieces hnas added.
            HNAS_CHECK(tensor.rank() >= 1 && tensor.dim(0) == static_cast<int64_t>(rows.size()), "export: ", checkpoint_path, ": ",
                       entry.name, " has shape ", shape_str(tensor.shape()), " but the tokenizer has ", rows.size(), " pieces");
            const int64_t width = tensor.numel() / tensor.dim(0);
            const int64_t kept = static_cast<int64_t>(std::count_if(rows.begin(), rows.end(), [](int64_t r) { return r >= 0; }));
            Shape shape = tensor.shape();
            shape[0] = kept;
            Tensor reordered = Tensor::empty(shape);
            for (size_t j = 0; j < rows.size(); ++j) {
                if (rows[j] < 0) continue;
                std::memcpy(reordered.data() + rows[j] * width, tensor.data() + static_cast<int64_t>(j) * width,
                            static_cast<size_t>(width) * sizeof(float));
            }
            tensor = reordered;
        }
        out.tensors.emplace(name.empty() ? "hnas." + entry.name : name, tensor);
    }
    out.metadata = {{"format", "pt"}, {"exported_by", std::string("hnas ") + HNAS_VERSION}, {"from", checkpoint_path}};
    fs::create_directories(out_dir);
    const Json kinds = trained.config.resolved.at("model").at("attention");
    const int64_t vocab_rows = rows.empty() ? model.vocab_size : out.tensors.at(kWordEmbeddings).dim(0);
    const Json hf = {{"architectures", {"BertForPreTraining"}},
                     {"model_type", "bert"},
                     {"hidden_size", model.width},
                     {"num_hidden_layers", model.encoder_layers},
                     {"num_attention_heads", model.heads},
                     {"intermediate_size", model.ffn_width},
                     {"max_position_embeddings", model.max_source_positions},
                     {"type_vocab_size", model.segments},
                     {"vocab_size", vocab_rows},
                     {"layer_norm_eps", model.layer_norm_eps},
                     {"hidden_act", "gelu"},
                     {"hidden_dropout_prob", model.residual_dropout},
                     {"attention_probs_dropout_prob", model.attention_dropout},
                     {"pad_token_id", rows.empty() ? 0 : rows[data::kPadId]},
                     {"hnas_attention", kinds}};
    io::write_safetensors((fs::path(out_dir) / "model.safetensors").string(), out);
    write_file_atomically((fs::path(out_dir) / "config.json").string(), hf.dump(2) + "\n");
    if (trained.tokenizer.kind() == data::TokenizerKind::wordpiece) {
        // The serialized WordPiece model is its magic line and then the vocab.txt text.
        const std::string& serialized = trained.tokenizer.serialized_model();
        write_file_atomically((fs::path(out_dir) / "vocab.txt").string(), serialized.substr(serialized.find('\n') + 1));
    } else {
        write_file_atomically((fs::path(out_dir) / "tokenizer.model").string(), trained.tokenizer.serialized_model());
    }
}

}  // namespace hnas::convert
