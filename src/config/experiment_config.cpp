#include "config/experiment_config.h"

#include "tensor/check.h"

namespace hnas::config {

namespace {

using models::AttentionStackConfig;
using models::ModelConfig;

// One attention stack: "kind" (a name, or one per layer), the kinds' settings, the prior.
AttentionStackConfig parse_attention_stack(ConfigNode& node, int64_t layers, nn::AttentionRole role,
                                           const std::string& fallback_kind) {
    AttentionStackConfig stack;
    stack.kinds = node.text_or_list("kind", fallback_kind);
    if (stack.kinds.size() == 1) stack.kinds.assign(static_cast<size_t>(layers), stack.kinds[0]);
    if (static_cast<int64_t>(stack.kinds.size()) != layers) {
        node.fail("kind", "lists " + std::to_string(stack.kinds.size()) + " kinds for " + std::to_string(layers) +
                              " layers (give one name for all layers, or one per layer)");
    }
    for (const std::string& kind : stack.kinds) {
        try {
            nn::check_attention_kind_allowed(kind, role);
        } catch (const Error& e) {
            node.fail("kind", e.what());
        }
    }
    // hybrid_init is a probability u; 0 and 1 would need an infinite θ.
    stack.kind_options.hybrid_init = static_cast<float>(node.number("hybrid_init", 0.5, 1e-6, 1.0 - 1e-6));
    stack.kind_options.iterations = static_cast<int>(node.integer("sinkhorn_iterations", 3, 1, 1000));
    stack.kind_options.nap_eps = static_cast<float>(node.number("nap_eps", 1e-5, 1e-12, 1.0));
    ConfigNode prior = node.child("prior");
    if (prior.boolean("enabled", false)) {
        nn::RelativePositionOptions options;
        options.buckets = prior.integer("buckets", 32, 4, 4096);
        options.max_distance = prior.integer("max_distance", 128, options.buckets / 2 + 1);
        options.bidirectional = role != nn::AttentionRole::causal_self;
        stack.prior = options;
    }
    node.finish_child("prior", prior);
    return stack;
}

ModelConfig parse_model(ConfigNode& node, Task task) {
    ModelConfig m;
    const bool seq2seq = task == Task::headline;
    m.architecture = seq2seq ? models::Architecture::seq2seq : models::Architecture::bert;
    m.vocab_size = node.integer("vocab_size", 0, 0);
    m.width = node.integer("d_model", seq2seq ? 512 : 768, 1);
    m.heads = node.integer("heads", seq2seq ? 8 : 12, 1);
    if (m.width % m.heads != 0) {
        node.fail("heads", std::to_string(m.heads) + " heads do not divide d_model = " + std::to_string(m.width));
    }
    m.ffn_width = node.integer("ffn_dim", 4 * m.width, 1);
    m.encoder_layers = node.integer("encoder_layers", seq2seq ? 6 : 12, 1);
    if (seq2seq) m.decoder_layers = node.integer("decoder_layers", 6, 1);
    m.activation = node.choice("activation", "gelu", {"gelu", "relu"}) == "gelu" ? nn::Activation::gelu : nn::Activation::relu;
    m.pre_norm = node.choice("norm", "post", {"post", "pre"}) == "pre";
    m.positions = node.choice("positions", "learned", {"learned", "sinusoidal"}) == "learned"
                      ? models::PositionEncoding::learned
                      : models::PositionEncoding::sinusoidal;
    if (seq2seq) {
        m.max_source_positions = node.integer("max_source_positions", 128, 1);
        m.max_target_positions = node.integer("max_target_positions", 64, 1);
        m.tie_embeddings = node.boolean("tie_embeddings", true);
        m.scale_embeddings = node.boolean("scale_embeddings", true);
        m.embedding_norm = node.boolean("embedding_norm", false);
    } else {
        m.max_source_positions = node.integer("max_positions", 512, 1);
        m.segments = node.integer("segments", 2, 1);
        m.scale_embeddings = false;
        m.embedding_norm = true;
    }
    ConfigNode dropout = node.child("dropout");
    m.embedding_dropout = static_cast<float>(dropout.number("embedding", 0.1, 0.0, 0.99));
    m.attention_dropout = static_cast<float>(dropout.number("attention", 0.1, 0.0, 0.99));
    m.residual_dropout = static_cast<float>(dropout.number("residual", 0.1, 0.0, 0.99));
    m.ffn_dropout = static_cast<float>(dropout.number("ffn", 0.0, 0.0, 0.99));
    node.finish_child("dropout", dropout);

    ConfigNode attention = node.child("attention");
    ConfigNode encoder = attention.child("encoder");
    m.encoder_attention = parse_attention_stack(encoder, m.encoder_layers, nn::AttentionRole::bidirectional, "lnas");
    attention.finish_child("encoder", encoder);
    if (seq2seq) {
        ConfigNode decoder = attention.child("decoder");
        m.decoder_attention = parse_attention_stack(decoder, m.decoder_layers, nn::AttentionRole::causal_self, "lnas");
        attention.finish_child("decoder", decoder);
        ConfigNode cross = attention.child("cross");
        m.cross_attention = parse_attention_stack(cross, m.decoder_layers, nn::AttentionRole::decoder_cross, "lnas");
        attention.finish_child("cross", cross);
    }
    node.finish_child("attention", attention);
    return m;
}

}  // namespace

ExperimentConfig parse_experiment_config(const Json& raw) {
    ConfigNode root(raw, "");
    ExperimentConfig config;
    config.task = root.choice("task", "headline", {"headline", "mlm"}) == "headline" ? Task::headline : Task::mlm;
    config.seed = static_cast<uint64_t>(root.integer("seed", 1, 0));
    ConfigNode model = root.child("model");
    config.model = parse_model(model, config.task);
    root.finish_child("model", model);
    if (config.task == Task::headline) config.init_from = root.text("init_from", "");
    root.finish();
    config.resolved = root.resolved();
    return config;
}

ExperimentConfig load_experiment_config(const std::string& path, const std::vector<std::string>& overrides) {
    Json raw = read_json_file(path);
    for (const std::string& assignment : overrides) apply_override(raw, assignment);
    try {
        return parse_experiment_config(raw);
    } catch (const Error& e) {
        throw Error(std::string(e.what()) + " (in " + path + ")");
    }
}

}  // namespace hnas::config
