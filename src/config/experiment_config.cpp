#include "config/experiment_config.h"

#include "base/check.h"

namespace hnas::config {

namespace {

constexpr Task kTasks[] = {Task::headline, Task::mlm, Task::classify, Task::span};

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
    m.layer_norm_eps = static_cast<float>(node.number("layer_norm_eps", 1e-5, 1e-30, 1.0));
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

// A string or a list of strings; empty when absent or [] (the resolved form, which checkpoints store).
std::vector<std::string> text_list(ConfigNode& node, const std::string& key) {
    if (node.has(key) && node.raw(key) != Json::array()) return node.text_or_list(key, "");
    node.raw(key);
    node.set_resolved(key, Json::array());
    return {};
}

TokenizerConfig parse_tokenizer(ConfigNode& node) {
    TokenizerConfig t;
    t.model = node.text("model", "");
    t.vocab_size = static_cast<int>(node.integer("vocab_size", 8000, 16, 1000000));
    t.type = node.choice("type", "unigram", {"unigram", "bpe", "wordpiece"});
    if (t.type == "wordpiece" && t.model.empty()) node.fail("model", "is required for a wordpiece tokenizer: its vocab.txt (data/vocab/vocab.txt is BERT's)");
    t.inputs = text_list(node, "inputs");
    t.input_sentence_size = node.integer("input_sentence_size", 200000, 0);
    return t;
}

// A list of {"path": ..., "unit": "file" | "block" | "line"} text sources.
std::vector<data::TextSource> parse_sources(ConfigNode& node, const std::string& key,
                                            const std::vector<std::string>& fallback_paths) {
    std::vector<data::TextSource> sources;
    Json resolved = Json::array();
    if (!node.has(key)) {
        for (const std::string& path : fallback_paths) sources.push_back({path, data::DocumentUnit::block});
    }
    const Json list = node.has(key) ? node.raw(key) : Json::array();
    if (!list.is_array()) node.fail(key, "expected a list of {\"path\": ..., \"unit\": ...} objects");
    for (size_t i = 0; i < list.size(); ++i) {
        ConfigNode item(list[i], node.path_of(key) + "[" + std::to_string(i) + "]");
        data::TextSource source;
        source.path = item.text("path", "");
        if (source.path.empty()) item.fail("path", "is required");
        source.unit = data::parse_document_unit(item.choice("unit", "block", {"file", "block", "line"}));
        item.finish();
        sources.push_back(source);
    }
    for (const auto& source : sources) {
        const char* unit = source.unit == data::DocumentUnit::file ? "file" : source.unit == data::DocumentUnit::block ? "block" : "line";
        resolved.push_back({{"path", source.path}, {"unit", unit}});
    }
    node.set_resolved(key, resolved);
    return sources;
}

DataConfig parse_data(ConfigNode& node, Task task) {
    DataConfig d;
    if (task == Task::headline) {
        d.train_articles = node.text("train_articles", "data/gigaword/derived/train_all.article.txt");
        d.train_titles = node.text("train_titles", "data/gigaword/derived/train_all.title.txt");
        d.valid_articles = node.text("valid_articles", "data/gigaword/valid_1k/valid.article.filter.txt");
        d.valid_titles = node.text("valid_titles", "data/gigaword/valid_1k/valid.title.filter.txt");
        d.max_source = node.integer("max_source", 128, 1);
        d.max_target = node.integer("max_target", 64, 2);
        d.shuffle_buffer = node.integer("shuffle_buffer", 65536, 1);
    } else if (task == Task::classify || task == Task::span) {
        d.train_file = node.text("train_file", "");
        if (d.train_file.empty()) node.fail("train_file", "is required");
        d.valid_file = node.text("valid_file", "");
        d.max_seq = node.integer("max_seq", task == Task::span ? 384 : 128, 8);
        if (task == Task::classify) {
            d.text_a_column = node.integer("text_a_column", 0, 0, 1000);
            d.text_b_column = node.integer("text_b_column", -1, -1, 1000);
            d.label_column = node.integer("label_column", 1, 0, 1000);
            d.header = node.boolean("header", true);
            d.regression = node.boolean("regression", false);
            d.labels = text_list(node, "labels");
            if (d.regression && !d.labels.empty()) node.fail("labels", "are for classes; a regression target has none");
        } else {
            d.doc_stride = node.integer("doc_stride", 128, 1);
            d.max_query = node.integer("max_query", 64, 1);
            d.max_answer = node.integer("max_answer", 30, 1);
            d.null_threshold = node.number("null_threshold", 0.0);
            if (d.max_query + 3 >= d.max_seq) node.fail("max_query", "leaves no room for the context in max_seq pieces");
        }
    } else {
        d.train_sources = parse_sources(node, "train_sources", {"data/corpus/moby_dick.txt"});
        d.valid_sources = parse_sources(node, "valid_sources", {});
        d.max_seq = node.integer("max_seq", 128, 8);
        d.masking.mask_prob = node.number("mask_prob", 0.15, 0.0, 1.0);
        d.masking.max_ngram = static_cast<int>(node.integer("max_ngram", 3, 1, 3));
    }
    d.batch_sentences = node.integer("batch_sentences", 32, 0);
    d.batch_tokens = node.integer("batch_tokens", 0, 0);
    if (d.batch_sentences == 0 && d.batch_tokens == 0) node.fail("batch_sentences", "and batch_tokens cannot both be 0");
    d.damaged_lines = parse_damaged_lines(node.choice("damaged_lines", "reject", {"reject", "skip"}));
    return d;
}

TrainConfig parse_train(ConfigNode& node, Task task) {
    TrainConfig t;
    const std::string optimizer = node.choice("optimizer", "adamw", {"adam", "adamw", "lamb"});
    t.optimizer.kind = optimizer == "adam" ? optim::OptimizerKind::adam
                       : optimizer == "adamw" ? optim::OptimizerKind::adamw
                                              : optim::OptimizerKind::lamb;
    t.optimizer.beta1 = static_cast<float>(node.number("beta1", 0.9, 0.0, 0.999999));
    t.optimizer.beta2 = static_cast<float>(node.number("beta2", 0.999, 0.0, 0.999999));
    t.optimizer.epsilon = static_cast<float>(node.number("epsilon", 1e-8, 1e-20, 1.0));
    t.optimizer.weight_decay = static_cast<float>(node.number("weight_decay", 0.01, 0.0, 1.0));
    t.schedule.learning_rate = node.number("learning_rate", 1e-3, 0.0, 10.0);
    const std::string schedule = node.choice("schedule", "linear", {"constant", "linear", "inverse_sqrt", "cosine"});
    t.schedule.kind = schedule == "constant" ? optim::ScheduleKind::constant
                      : schedule == "linear" ? optim::ScheduleKind::linear
                      : schedule == "inverse_sqrt" ? optim::ScheduleKind::inverse_sqrt
                                                   : optim::ScheduleKind::cosine;
    t.schedule.warmup_steps = node.integer("warmup_steps", 0, 0);
    t.schedule.min_learning_rate = node.number("min_learning_rate", 0.0, 0.0, 10.0);
    t.steps = node.integer("steps", 10000, 1);
    t.schedule.total_steps = t.steps;
    t.gradient_accumulation = node.integer("gradient_accumulation", 1, 1);
    t.clip_norm = node.number("clip_norm", 1.0, 0.0);
    if (task == Task::headline) t.label_smoothing = static_cast<float>(node.number("label_smoothing", 0.1, 0.0, 0.99));
    if (task == Task::mlm) t.sentence_order_weight = static_cast<float>(node.number("sentence_order_weight", 1.0, 0.0, 100.0));
    t.log_every = node.integer("log_every", 50, 1);
    t.threads = static_cast<int>(node.integer("threads", 0, 0, 1024));
    t.precision = node.choice("precision", "f32", {"f32", "bf16"}) == "bf16" ? backend::MatmulPrecision::bf16
                                                                            : backend::MatmulPrecision::f32;
    t.collective_timeout = node.number("collective_timeout", 600.0, 1.0, 86400.0);
    return t;
}

ValidationConfig parse_validation(ConfigNode& node, Task task, const DataConfig& data) {
    ValidationConfig v;
    v.every = node.integer("every", 500, 0);
    v.max_batches = node.integer("max_batches", 0, 0);
    if (task == Task::headline) {
        v.decode_examples = node.integer("decode_examples", 200, 0);
        v.max_decode_length = node.integer("max_decode_length", 30, 1);
        // ROUGE-L needs decoded headlines: without them the loss picks the best checkpoint.
        v.metric = node.choice("metric", v.decode_examples > 0 ? "rouge_l" : "loss", {"loss", "rouge_l"});
        if (v.metric == "rouge_l" && v.decode_examples == 0) node.fail("metric", "is rouge_l, which needs decode_examples > 0");
    } else if (task == Task::mlm) {
        v.metric = node.choice("metric", "loss", {"loss", "mlm_accuracy", "sop_accuracy"});
    } else if (task == Task::classify) {
        // GLUE's metrics: of classes, or of a regression target (STS-B)
        v.metric = data.regression ? node.choice("metric", "pearson", {"loss", "pearson", "spearman"})
                                   : node.choice("metric", "accuracy", {"loss", "accuracy", "f1", "mcc"});
    } else if (task == Task::span) {
        v.metric = node.choice("metric", "f1", {"loss", "exact_match", "f1"});
    }
    v.patience = node.integer("patience", 0, 0);
    return v;
}

CheckpointConfig parse_checkpoint(ConfigNode& node) {
    CheckpointConfig c;
    c.every = node.integer("every", 1000, 1);
    c.keep = node.integer("keep", 3, 1);
    return c;
}

}  // namespace

void set_bert_heads(ExperimentConfig& config) {
    models::BertHeads& heads = config.model.bert_heads;
    heads.masked_lm = config.task == Task::mlm;
    heads.sentence_order = config.task == Task::mlm && config.train.sentence_order_weight > 0.0f;
    heads.classes = config.task != Task::classify ? 0
                    : config.data.regression      ? 1
                                                  : static_cast<int64_t>(config.data.labels.size());
    heads.span = config.task == Task::span;
}

const char* task_name(Task task) {
    switch (task) {
        case Task::headline: return "headline";
        case Task::mlm: return "mlm";
        case Task::classify: return "classify";
        case Task::span: return "span";
    }
    return "?";
}

std::vector<std::string> task_names() {
    std::vector<std::string> names;
    for (const Task task : kTasks) names.emplace_back(task_name(task));
    return names;
}

ExperimentConfig parse_experiment_config(const Json& raw) {
    ConfigNode root(raw, "");
    ExperimentConfig config;
    const std::string task = root.choice("task", "headline", task_names());
    for (const Task known : kTasks) {
        if (task == task_name(known)) config.task = known;
    }
    config.seed = static_cast<uint64_t>(root.integer("seed", 1, 0));
    ConfigNode model = root.child("model");
    config.model = parse_model(model, config.task);
    root.finish_child("model", model);
    config.init_from = root.text("init_from", "");
    ConfigNode tokenizer = root.child("tokenizer");
    config.tokenizer = parse_tokenizer(tokenizer);
    root.finish_child("tokenizer", tokenizer);
    ConfigNode data = root.child("data");
    config.data = parse_data(data, config.task);
    root.finish_child("data", data);
    ConfigNode train = root.child("train");
    config.train = parse_train(train, config.task);
    root.finish_child("train", train);
    set_bert_heads(config);
    ConfigNode validation = root.child("validation");
    config.validation = parse_validation(validation, config.task, config.data);
    if (config.validation.metric == "sop_accuracy" && !config.model.bert_heads.sentence_order) {
        validation.fail("metric", "is sop_accuracy, which needs train.sentence_order_weight > 0");
    }
    root.finish_child("validation", validation);
    ConfigNode checkpoint = root.child("checkpoint");
    config.checkpoint = parse_checkpoint(checkpoint);
    root.finish_child("checkpoint", checkpoint);
    root.finish();
    config.resolved = root.resolved();
    return config;
}

ExperimentConfig load_experiment_config(const std::string& path, const std::vector<std::string>& overrides) {
    Json raw = read_json_file(path);
    // Checked before the overrides, which add keys to the top level (nlohmann would turn a null into {}).
    HNAS_CHECK(raw.is_object(), "config ", path, ": expected an object {…} at the top level, got ", raw.type_name());
    for (const std::string& assignment : overrides) apply_override(raw, assignment);
    try {
        return parse_experiment_config(raw);
    } catch (const Error& e) {
        throw Error(std::string(e.what()) + " (in " + path + ")");
    } catch (const nlohmann::json::exception& e) {
        throw Error(std::string("config ") + path + ": " + e.what());
    }
}

}  // namespace hnas::config
