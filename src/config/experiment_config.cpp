#include "config/experiment_config.h"

#include <map>
#include <sstream>

#include "base/check.h"

namespace hnas::config {

namespace {

using models::AttentionStackConfig;
using models::ModelConfig;

// Every key reads its default from the struct it fills (`x = node.integer("key", x, ...)`), so the
// initializers in experiment_config.h and model_config.h, changed per task by defaults_for, are the
// only defaults; the Doc beside each read is the only description of the key.

// What `kind` means: every registered kind with its description.
const std::string& kind_meaning() {
    static const std::string meaning = [] {
        std::string text = "the normalization, for all layers or one per layer:";
        for (const nn::AttentionKind* kind : nn::attention_kinds()) {
            text.append(" `").append(kind->name).append("`: ").append(kind->description).append(";");
        }
        text.back() = '.';
        return text.append(" Kinds that would let a target position see later ones (those normalizing over all "
                           "queries at once, and `ot`, whose weights spread over every template) are rejected in causal "
                           "self-attention and cross-attention");
    }();
    return meaning;
}

// One attention stack: "kind" (a name, or one per layer), the kinds' settings, the prior.
void parse_attention_stack(ConfigNode& node, int64_t layers, nn::AttentionRole role, AttentionStackConfig& stack) {
    stack.kinds = node.text_or_list("kind", stack.kinds, Doc(kind_meaning().c_str()));
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
    stack.score_scale = node.choice("score_scale", stack.score_scale,
                                    "the factor on QKᵀ: `inv_sqrt_head_width` 1/√(d_model/heads), or `none` (paper 000 "
                                    "Eq. 1-8; paper 002's code for NAP)");
    stack.kind_settings = nn::read_kind_settings(node);
    stack.alpha = static_cast<float>(node.number(
        "alpha", stack.alpha,
        "α of paper 003 Eq. 18 (and Eq. 25 for `ot`): the weight of the evidence against the preference u, the scores being "
        "α·QKᵀ·`score_scale`; 1 is the scaled dot product (`ot`'s γ is 1/`score_scale`: √(d_model/heads) by default)",
        1e-6, 1e6));
    ConfigNode prior = node.child("prior", "the learned relative-position prior (T5 buckets, paper 003), below");
    nn::RelativePositionOptions options;
    const bool enabled = prior.boolean(
        "enabled", stack.prior.has_value(),
        "add a learned bias per head and relative-distance bucket to the scores before normalization (`ot`: the log of "
        "its preference u over the templates)");
    options.buckets = prior.integer("buckets", options.buckets,
                                    "buckets: exact for short distances, logarithmic up to `max_distance`; bidirectional in "
                                    "the encoder and cross-attention, past-only in causal self-attention",
                                    4, 4096);
    options.max_distance = prior.integer("max_distance", options.max_distance,
                                         "distance where the logarithmic buckets end; more than `buckets` / 2",
                                         options.buckets / 2 + 1);
    options.bidirectional = role != nn::AttentionRole::causal_self;
    stack.share_prior = prior.boolean("shared", stack.share_prior,
                                      "one table for all layers of the stack, its bias computed once per forward, as T5 "
                                      "has it (paper 003 §7 takes T5's prior); false: each layer learns its own");
    stack.prior.reset();
    if (enabled) stack.prior = options;
    node.finish_child("prior", prior);

    ConfigNode context = node.child("context_prior", "paper 003 §7's context-dependent preference, below");
    nn::ContextPreferenceOptions context_options = stack.context_prior.value_or(nn::ContextPreferenceOptions{});
    const bool context_enabled = context.boolean(
        "enabled", stack.context_prior.has_value(),
        "add a learned log-weight per head and key, from the key's input and the mean of the sequence's, to the scores "
        "before normalization (`ot`: to its preference u); it starts at zero, so u starts uniform");
    context_options.hidden = context.integer("hidden", context_options.hidden, "the width of its tanh layer", 1, 65536);
    if (context_enabled && role == nn::AttentionRole::causal_self) {
        context.fail("enabled", "causal self-attention cannot pool the sequence into a summary without seeing the future");
    }
    stack.context_prior.reset();
    if (context_enabled) stack.context_prior = context_options;
    node.finish_child("context_prior", context);
}

// The keys of models that read tokens through layer stacks: the attention block's options, positions
// and embeddings.
void parse_token_model(ConfigNode& node, ModelConfig& m) {
    const bool seq2seq = m.architecture == models::Architecture::seq2seq;
    m.mte_attention_norm = node.boolean("mte_attention_norm", m.mte_attention_norm,
                                        "`norm` mte: layer-normalize the attention's merged heads; paper 002's NON (kind "
                                        "`non`) turns it off, its weights carrying 1/√n instead");
    m.positions = node.choice("positions", m.positions, "position embeddings");
    if (seq2seq) {
        m.max_source_positions = node.integer("max_source_positions", m.max_source_positions, "longest source", 1, kMaxLength);
        m.max_target_positions = node.integer("max_target_positions", m.max_target_positions, "longest target", 1, kMaxLength);
        m.tie_embeddings = node.boolean("tie_embeddings", m.tie_embeddings, "the output projection is the shared token embedding");
        m.scale_embeddings = node.boolean("scale_embeddings", m.scale_embeddings,
                                          "token embeddings × √`d_model` (Vaswani et al.)");
        m.embedding_norm = node.boolean("embedding_norm", m.embedding_norm,
                                        "layer norm after the embedding sum (BERT has it always; needed to map BERT's "
                                        "under `init_from`)");
    } else if (m.architecture != models::Architecture::symbols) {  // symbols: the positions follow the task's lengths
        m.max_source_positions = node.integer("max_positions", m.max_source_positions, "longest sequence", 1, kMaxLength);
        m.segments = node.integer("segments", m.segments, "segment (sentence A/B) embeddings", 1, 1024);
    }
}

// Every task's model, by the architecture its task chose; the multi-view model (one fusion attention,
// then a readout) reads no tokens and has no layer stack, so it takes only the keys it uses.
void parse_model(ConfigNode& node, ModelConfig& m) {
    using models::Architecture;
    const bool seq2seq = m.architecture == Architecture::seq2seq, layered = m.architecture != Architecture::multiview,
               tokens = layered && m.architecture != Architecture::vit;
    if (tokens) m.vocab_size = node.integer("vocab_size", m.vocab_size, "the vocabulary; 0 takes the tokenizer's", 0, kMaxVocabulary);
    m.width = node.integer("d_model", m.width, "model width (multiview: the boxes' feature width)", 1, kMaxLength);
    m.heads = node.integer("heads", m.heads, "attention heads; must divide `d_model`", 1, 4096);
    if (m.width % m.heads != 0) {
        node.fail("heads", std::to_string(m.heads) + " heads do not divide d_model = " + std::to_string(m.width));
    }
    m.ffn_width = node.integer("ffn_dim", models::kFfnPerWidth * m.width,
                               Doc("feed-forward width (multiview: the readout's)", "4 · `d_model`"), 1, kMaxLength);
    if (layered) {
        m.encoder_layers = node.integer("encoder_layers", m.encoder_layers, "encoder layers", 1, kMaxLayers);
        if (seq2seq) {
            m.decoder_layers = node.integer("decoder_layers", m.decoder_layers, "decoder layers", 1, kMaxLayers);
            m.share_encoder_decoder = node.boolean(
                "share_encoder_decoder", m.share_encoder_decoder,
                "decoder layer i runs on encoder layer i's weights: its self- and cross-attention on that layer's "
                "attention projections, its feed-forward and norms the same; only the cross-attention's norm and the "
                "attention kinds' own scalars are the decoder's (paper 004 App. D's 108M-parameter reading)");
            if (m.share_encoder_decoder && m.decoder_layers != m.encoder_layers) {
                node.fail("share_encoder_decoder", "needs as many decoder layers as encoder layers, got " +
                                                       std::to_string(m.decoder_layers) + " and " +
                                                       std::to_string(m.encoder_layers));
            }
        }
        m.activation = node.choice("activation", m.activation, "feed-forward activation (GELU in its erf form)");
        m.norm = node.choice("norm", m.norm,
                             "post-LN `LN(x + f(x))` (the papers' setting), pre-LN `x + f(LN(x))` with a final norm per "
                             "stack, or paper 002's MTE block `x + LN(f(x))` with layer norms on the attention's merged "
                             "heads (then GELU) and on the feed-forward's hidden layer (App. D)");
    }
    m.mixer = node.choice("mixer", m.mixer,
                          "what mixes the encoder's positions: `attention` (of `attention.encoder.kind`), or paper "
                          "002's `sum` or `max` pooling over the real positions, broadcast back to each (multiview: "
                          "over a secondary view's boxes, the no-attention baseline)");
    if (m.share_encoder_decoder && m.mixer != nn::Mixer::attention) {
        node.fail("mixer", std::string("is ") + name_of(m.mixer) +
                               ", but share_encoder_decoder needs the encoder's attention projections for the decoder");
    }
    if (tokens) parse_token_model(node, m);
    m.weight_init = node.choice("weight_init", m.weight_init,
                                "`per_layer`: Xavier-uniform projections and normal embeddings; `truncated_normal`: every "
                                "matrix from N(0, 0.02²) truncated at 2σ (BERT's initializer; paper 002's code for all weights)");
    m.layer_norm_eps = node.number("layer_norm_eps", m.layer_norm_eps,
                                   "ε of every layer norm (BERT's public checkpoints use 1e-12)", 1e-30, 1.0);
    ConfigNode dropout = node.child("dropout", "dropout rates, below");
    if (layered) m.embedding_dropout = dropout.number("embedding", m.embedding_dropout, "after the embedding sum", 0.0, 0.99);
    m.attention_dropout = dropout.number("attention", m.attention_dropout, "on the attention weights", 0.0, 0.99);
    if (layered) {
        m.residual_dropout = dropout.number("residual", m.residual_dropout,
                                            "on every sub-layer's output before the residual sum", 0.0, 0.99);
        m.ffn_dropout = dropout.number("ffn", m.ffn_dropout, "inside the feed-forward, after the activation", 0.0, 0.99);
    }
    node.finish_child("dropout", dropout);

    ConfigNode attention = node.child(
        "attention", "one object per attention stack: `encoder`, and for headline models `decoder` and `cross`, below");
    ConfigNode encoder = attention.child("encoder", "self-attention of the encoder; multiview: primary boxes over a secondary view's");
    parse_attention_stack(encoder, layered ? m.encoder_layers : 1, nn::AttentionRole::bidirectional, m.encoder_attention);
    attention.finish_child("encoder", encoder);
    if (seq2seq) {
        ConfigNode decoder = attention.child("decoder", "causal self-attention of the decoder");
        parse_attention_stack(decoder, m.decoder_layers, nn::AttentionRole::causal_self, m.decoder_attention);
        attention.finish_child("decoder", decoder);
        ConfigNode cross = attention.child("cross", "decoder-to-encoder attention");
        parse_attention_stack(cross, m.decoder_layers, nn::AttentionRole::decoder_cross, m.cross_attention);
        attention.finish_child("cross", cross);
    }
    node.finish_child("attention", attention);
}

void parse_tokenizer(ConfigNode& node, TokenizerConfig& t) {
    t.model = node.text("model", t.model,
                        "an existing SentencePiece `.model` (with hnas's special ids, e.g. from `hnas vocab`), or with "
                        "`type` `\"wordpiece\"` a BERT `vocab.txt` (`data/vocab/vocab.txt` is bert-base-uncased's); empty: "
                        "train a SentencePiece model into the run directory at the start");
    t.vocab_size = static_cast<int>(node.integer(
        "vocab_size", t.vocab_size,
        "pieces of a trained model, the 7 special ones (pad 0, unk 1, bos 2, eos 3, [CLS] 4, [SEP] 5, [MASK] 6) included",
        16, 1000000));
    t.type = node.choice("type", t.type,
                         "SentencePiece model type, or BERT's uncased WordPiece (basic tokenization + greedy "
                         "longest-match-first `##` pieces, `src/data/wordpiece.h`); its ids are renumbered to hnas's "
                         "special ids and it gains `[BOS]`/`[EOS]` when the file lacks them (30,524 ids for BERT's 30,522 "
                         "lines)");
    if (t.type == data::TokenizerType::wordpiece && t.model.empty()) {
        node.fail("model", "is required for a wordpiece tokenizer: its vocab.txt (data/vocab/vocab.txt is BERT's)");
    }
    t.inputs = text_list(node, "inputs",
                         "text files to train it on; empty: the training data (article and title files, or the MLM sources)");
    t.input_sentence_size = node.integer("input_sentence_size", t.input_sentence_size,
                                         "lines sampled for training (seeded); 0: all", 0);
}

// The data keys every task shares (the task reads its files and sizes after them).
void parse_data(ConfigNode& node, DataConfig& d) {
    d.batch_sentences = node.integer("batch_sentences", d.batch_sentences, "rows per batch; 0: no limit", 0, kMaxRows);
    d.batch_tokens = node.integer("batch_tokens", d.batch_tokens, "padded tokens per batch (rows × padded length); 0: no limit", 0, kMaxBatchTokens);
    d.pad_multiple = node.integer("pad_multiple", d.pad_multiple,
                                  "a batch of token rows is padded to its longest row rounded up to a multiple of this (at "
                                  "most the longest row allowed): a few batch shapes instead of one per length, whose tensor "
                                  "blocks and matmul primitives later batches reuse (docs/performance.md); the loss "
                                  "and attention mask the padding; 1: pad to the longest row",
                                  1, 128);
    if (d.batch_sentences == 0 && d.batch_tokens == 0) node.fail("batch_sentences", "and batch_tokens cannot both be 0");
    d.damaged_lines = node.choice("damaged_lines", d.damaged_lines,
                                  "a text line with invalid UTF-8 or a control byte (NUL and other C0 codes except tab; a CR "
                                  "only as a CRLF line ending), as a crash leaves in a file: `\"reject\"` stops before the run "
                                  "writes anything, naming file and line; `\"skip\"` leaves such lines out (a headline pair "
                                  "when either line is damaged) and logs their count per file");
}

void parse_train(ConfigNode& node, TrainConfig& t) {
    t.optimizer.kind = node.choice("optimizer", t.optimizer.kind,
                                   "Adam (L2 weight decay in the gradient), AdamW (decoupled decay), LAMB (per-tensor trust "
                                   "ratio, You et al. 2019), or `lamb_albert`: LAMB as ALBERT's code (paper 004's "
                                   "pretraining) has it, without bias correction and without the trust ratio on biases and "
                                   "norms (ALBERT used `epsilon` 1e-6)");
    t.optimizer.beta1 = node.number("beta1", t.optimizer.beta1, "Adam's first-moment decay", 0.0, 0.999999);
    t.optimizer.beta2 = node.number("beta2", t.optimizer.beta2, "Adam's second-moment decay", 0.0, 0.999999);
    t.optimizer.epsilon = node.number("epsilon", t.optimizer.epsilon, "Adam's ε", 1e-20, 1.0);
    t.optimizer.weight_decay = node.number("weight_decay", t.optimizer.weight_decay,
                                           "never applied to biases, layer norms, hybrid θ, NAP gain/bias or the prior", 0.0, 1.0);
    t.optimizer.gate_rate_scale = static_cast<float>(node.number(
        "gate_learning_rate_scale", t.optimizer.gate_rate_scale,
        "hnas's gates θ (u = sigmoid(θ) per head) step at this multiple of the learning rate; Adam moves a parameter by "
        "about the rate per step, so at fine-tuning rates u hardly moves in an epoch",
        1e-3, 1e4));
    t.schedule.learning_rate = node.number("learning_rate", t.schedule.learning_rate, "peak learning rate", 0.0, 10.0);
    t.schedule.kind = node.choice("schedule", t.schedule.kind,
                                  "after `warmup_steps` of linear warm-up: constant, linear decay to 0 at `steps`, "
                                  "lr·√(warmup/step), a half cosine to `min_learning_rate`, or `bert_linear`: the linear "
                                  "decay counted from step 0, lr·(steps − step)/steps (BERT's and paper 002's code: a drop "
                                  "at the end of warm-up)");
    t.schedule.warmup_steps = node.integer("warmup_steps", t.schedule.warmup_steps, "linear warm-up", 0);
    t.schedule.min_learning_rate = node.number("min_learning_rate", t.schedule.min_learning_rate,
                                               "end of the cosine schedule", 0.0, 10.0);
    t.steps = node.integer("steps", t.steps, "optimizer steps of the run", 1);
    t.schedule.total_steps = t.steps;
    t.gradient_accumulation = node.integer("gradient_accumulation", t.gradient_accumulation, "batches summed into one step", 1);
    t.clip_norm = node.number("clip_norm", t.clip_norm, "gradient-norm clipping; 0: none", 0.0);
    t.clip_scope = node.choice("clip_scope", t.clip_scope,
                               "what `clip_norm` bounds: the `global` norm of all gradients, or each tensor's norm on its "
                               "own (`per_tensor`, TensorFlow's clip_by_norm per variable, as paper 002's code clipped)");
    t.log_every = node.integer("log_every", t.log_every, "steps between progress lines and `metrics.jsonl` records", 1);
    t.threads = static_cast<int>(node.integer("threads", t.threads,
                                              "OpenMP threads for oneDNN and hnas's loops; 0: `OMP_NUM_THREADS` or all cores "
                                              "(under mpirun: capped so the ranks of a host never oversubscribe its cores, "
                                              "`docs/distributed.md`)",
                                              0, 1024));
    t.precision = node.choice("precision", t.precision,
                              "matrix products (projections, attention scores and A·V, feed-forward, output projection, "
                              "forward and backward): exact f32, or bf16 on the CPU's AVX512-BF16 / AMX, below");
    t.collective_timeout = node.number("collective_timeout", t.collective_timeout,
                                       "under mpirun: seconds a rank waits for the others in a gradient sum or a broadcast "
                                       "before it ends the job naming the ranks that did not arrive; must exceed rank 0's "
                                       "longest validation plus checkpoint write, which the other ranks wait through",
                                       1.0, 86400.0);
    t.bf16_gradient_sums = node.boolean("bf16_gradient_sums", t.bf16_gradient_sums,
                                        "under mpirun: each rank's gradients are rounded to bf16 and summed over the "
                                        "ranks in bf16 (each addition in f32, then rounded), half the bytes of f32 sums "
                                        "on a slow link, as PyTorch DDP's bf16 compression hook");
}

void parse_validation_cadence(ConfigNode& node, ValidationConfig& v) {
    v.every = node.integer("every", v.every, "steps between validations (and one at the end); 0: only at the end", 0);
    v.max_batches = node.integer("max_batches", v.max_batches, "validation batches for the loss; 0: all", 0);
}

// validation.metric and patience, after the task has read its keys: the metrics it reports depend on them.
void parse_validation(ConfigNode& node, const ExperimentConfig& config, ValidationConfig& v) {
    const std::vector<std::string> metrics = config.task->metrics(config);
    v.metric = node.choice("metric", metrics[0],
                           Doc("what selects `best.ckpt` and drives early stopping: `\"loss\"` is better lower, every "
                               "other metric higher (`f1` of classify: two classes; `sop_accuracy` needs "
                               "`train.sentence_order_weight` > 0; `rouge_l` needs `decode_examples` > 0)",
                               "the first listed"),
                           metrics);
    v.patience = node.integer("patience", v.patience, "stop after this many validations without improvement; 0: never", 0);
}

void parse_checkpoint(ConfigNode& node, CheckpointConfig& c) {
    c.every = node.integer("every", c.every,
                           "steps between checkpoints (one is also written at the end, on SIGINT/SIGTERM and on `--stop-after`)", 1);
    c.keep = node.integer("keep", c.keep, "step checkpoints kept in `RUN_DIR/checkpoints/`; `best.ckpt` is kept besides", 1);
}

void parse_test(ConfigNode& node, TestConfig& t) {
    t.checkpoint = node.choice("checkpoint", t.checkpoint,
                               "the checkpoint `hnas test` scores: `\"best\"` (`best.ckpt`; the newest step checkpoint when "
                               "the run never validated) or `\"last\"` (the newest step checkpoint)");
}

// The structs' initializers, then the task's defaults.
ExperimentConfig defaults_for(const TaskSchema& task) {
    ExperimentConfig config;
    config.task = &task;
    task.defaults(config);
    return config;
}

// What `task` means: every task the parser is given, with its description.
std::string task_meaning(const TaskSchemas& tasks) {
    std::string text = "the training objective; its code, options and metrics are in `src/tasks/<name>/`:";
    for (const TaskSchema* task : tasks) text.append(" `").append(task->name).append("`: ").append(task->description).append(";");
    text.back() = '.';
    return text;
}

const TaskSchema& parse_task(ConfigNode& root, const TaskSchemas& tasks) {
    HNAS_CHECK(!tasks.empty(), "config: no tasks to parse a config for");
    std::vector<std::string> names;
    for (const TaskSchema* task : tasks) names.push_back(task->name);
    const std::string meaning = task_meaning(tasks);
    const std::string name = root.choice("task", names[0], Doc(meaning.c_str()), names);
    return **std::find_if(tasks.begin(), tasks.end(), [&](const TaskSchema* task) { return name == task->name; });
}

}  // namespace

std::vector<std::string> text_list(ConfigNode& node, const std::string& key, const Doc& doc) {
    const Json value = node.raw(key, "string or list of strings", Json::array(), doc);
    std::vector<std::string> list;
    if (value.is_string()) list.push_back(value.get<std::string>());
    if (value.is_array()) {
        for (const Json& item : value) {
            if (!item.is_string()) node.fail(key, "expected a string or a list of strings, got " + value.dump());
            list.push_back(item.get<std::string>());
        }
    } else if (!value.is_null() && !value.is_string()) {
        node.fail(key, "expected a string or a list of strings, got " + value.dump());
    }
    node.set_resolved(key, list.size() == 1 ? Json(list[0]) : Json(list));
    return list;
}

Json upgrade_saved_config(Json saved) {
    if (!saved.contains("model") || !saved["model"].contains("attention")) return saved;
    for (auto& [stack_name, stack] : saved["model"]["attention"].items()) {
        if (!stack.is_object() || !stack.contains("ot_alpha")) continue;
        const double alpha = stack.at("ot_alpha").get<double>();
        const Json kinds = stack.contains("kind") ? stack.at("kind") : Json(nn::default_attention_kind());
        // `ot_alpha` weighed the evidence of the kind that compares templates (`ot`)
        const auto is_ot = [](const Json& kind) {
            for (const nn::AttentionKind* registered : nn::attention_kinds()) {
                if (kind == registered->name) return registered->compares_templates;
            }
            return false;
        };
        const bool only_ot = kinds.is_array() ? std::all_of(kinds.begin(), kinds.end(), is_ot) : is_ot(kinds);
        HNAS_CHECK(alpha == 1.0 || only_ot, "config model.attention.", stack_name, ".ot_alpha: ", alpha, " was saved by an earlier ",
                   "hnas, where it weighed only `ot`'s evidence; today `alpha` weighs every kind's, so a stack mixing `ot` with ",
                   "other kinds has no equivalent");
        if (alpha != 1.0) stack["alpha"] = alpha;
        stack.erase("ot_alpha");
    }
    return saved;
}

ExperimentConfig parse_experiment_config(const Json& raw, const TaskSchemas& tasks, KeyLog* log) {
    ConfigNode root(raw, "", log);
    ExperimentConfig config = defaults_for(parse_task(root, tasks));
    config.seed = static_cast<uint64_t>(root.integer(
        "seed", static_cast<int64_t>(config.seed), "seeds initialization, dropout and data order (separate streams)", 0));
    ConfigNode model = root.child("model", "the model, below");
    parse_model(model, config.model);
    root.finish_child("model", model);
    config.init_from = root.text(
        "init_from", config.init_from,
        "a checkpoint a new run starts from (ignored on `--resume`). headline: an MLM checkpoint to start encoder and decoder "
        "from (⟨BERT,BERT⟩), cross-attention fresh; every other task: the parameters it holds by name (a pretrained "
        "encoder; heads it lacks start fresh, each logged). Its model must compute what the run's does: the same heads, norm, "
        "activation, positions, mixer and layer_norm_eps, and no layer it lacks. Without `tokenizer.model` the run uses this "
        "checkpoint's tokenizer");
    ConfigNode tokenizer = root.child("tokenizer", "the tokenizer, below; it travels inside every checkpoint");
    parse_tokenizer(tokenizer, config.tokenizer);
    root.finish_child("tokenizer", tokenizer);
    // The shared keys of each section first, then the task's own.
    ConfigNode data = root.child("data", "training and validation data, below; paths are relative to where `hnas` runs");
    ConfigNode train = root.child("train", "optimization, below");
    ConfigNode validation = root.child("validation", "validation cadence and metric, below");
    ConfigNode test = root.child("test", "what `hnas test` scores a finished run on (the result of a sweep's trial), below; "
                                         "mlm: the validation loss and accuracies of `test.sources`");
    parse_data(data, config.data);
    parse_train(train, config.train);
    parse_validation_cadence(validation, config.validation);
    parse_test(test, config.test);
    TaskSections sections{data, train, validation, test};
    config.task->parse(sections, config);
    parse_validation(validation, config, config.validation);
    root.finish_child("data", data);
    root.finish_child("train", train);
    root.finish_child("validation", validation);
    ConfigNode checkpoint = root.child("checkpoint", "checkpoint cadence, below");
    parse_checkpoint(checkpoint, config.checkpoint);
    root.finish_child("checkpoint", checkpoint);
    root.finish_child("test", test);
    root.finish();
    config.resolved = root.resolved();
    return config;
}

ExperimentConfig load_experiment_config(const std::string& path, const TaskSchemas& tasks, const std::vector<std::string>& overrides) {
    Json raw = read_config_file(path);
    // Checked before the overrides, which add keys to the top level (nlohmann would turn a null into {}).
    HNAS_CHECK(raw.is_object(), "config ", path, ": expected an object {…} at the top level, got ", raw.type_name());
    for (const std::string& assignment : overrides) apply_override(raw, assignment);
    try {
        return parse_experiment_config(raw, tasks);
    } catch (const Error& e) {
        throw Error(std::string(e.what()) + " (in " + path + ")");
    } catch (const nlohmann::json::exception& e) {
        throw Error(std::string("config ") + path + ": " + e.what());
    }
}

}  // namespace hnas::config
