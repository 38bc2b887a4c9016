#include "config/experiment_config.h"

#include <map>
#include <sstream>

#include "base/check.h"

namespace hnas::config {

namespace {

// Upper bounds of sizes, so that every product of them that the model, the batches and the memory
// estimate compute stays far inside int64, and token ids inside int32.
constexpr int64_t kMaxLength = int64_t{1} << 20;  // widths, sequence lengths, positions
constexpr int64_t kMaxLayers = 1024;
constexpr int64_t kMaxVocabulary = int64_t{1} << 30;
constexpr int64_t kMaxRows = int64_t{1} << 20;  // rows per batch
constexpr int64_t kMaxBatchTokens = int64_t{1} << 30;

using models::AttentionStackConfig;
using models::ModelConfig;

// Every key reads its default from the struct it fills (`x = node.integer("key", x, ...)`), so the
// initializers in experiment_config.h and model_config.h, changed per task by defaults_for, are the
// only defaults; the Doc beside each read is the only description of the key.

// What `kind` means: every registered kind with its description.
const std::string& kind_meaning() {
    static const std::string meaning = [] {
        std::string text = "the normalization, for all layers or one per layer:";
        for (const nn::AttentionKind& kind : nn::attention_kinds()) {
            text.append(" `").append(kind.name).append("`: ").append(kind.description).append(";");
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
    nn::AttentionNormOptions& kinds = stack.kind_options;
    // hybrid_init is a probability u; 0 and 1 would need an infinite θ.
    kinds.hybrid_init = node.number("hybrid_init", kinds.hybrid_init,
                                    "`hnas`: the initial u of every head (the papers used 0.5, and 0.1 for headlines)", 1e-6,
                                    1.0 - 1e-6);
    kinds.hybrid_per = node.choice("hybrid_per", kinds.hybrid_per,
                                   "`hnas`: one trainable u per `head` (paper 004, Eq. 12) or per `layer`, shared by its "
                                   "heads (paper 000 §6)");
    kinds.iterations = static_cast<int>(
        node.integer("sinkhorn_iterations", kinds.iterations, "`sinkhorn`: k, the alternations; 1 is `dnas`", 1, 1000));
    kinds.nap.eps = node.number("nap_eps", kinds.nap.eps, "`nap`: the ε of `nap_denominator`", 1e-12, 1.0);
    kinds.nap.denominator = node.choice("nap_denominator", kinds.nap.denominator,
                                        "`nap`: what divides the centred scores: `sqrt_variance_eps` √(var + ε), as layer "
                                        "norm; `std_plus_eps` σ + ε, as paper 002's code computed it (with ε 1e-3)");
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

double parse_same_class_templates(ConfigNode& node, double fallback) {
    return node.number("same_class_templates", fallback,
                       "paper 003 §9's recipe (0.5 there): the probability that a training example's layers of a kind that "
                       "compares templates (`ot`) also weigh the templates of a random other training example of its class; "
                       "validation and test see only their input's; 0: never",
                       0.0, 1.0);
}

// The keys of models that read tokens through layer stacks: the attention block's options, positions
// and embeddings.
void parse_token_model(ConfigNode& node, Task task, ModelConfig& m) {
    const bool seq2seq = task == Task::headline;
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
    } else if (task != Task::synthetic) {  // synthetic: the positions follow data.length and data.valid_length
        m.max_source_positions = node.integer("max_positions", m.max_source_positions, "longest sequence", 1, kMaxLength);
        m.segments = node.integer("segments", m.segments, "segment (sentence A/B) embeddings", 1, 1024);
    }
}

// Every task's model; the multi-view model (one fusion attention, then a readout) reads no tokens and
// has no layer stack, so it takes only the keys it uses.
void parse_model(ConfigNode& node, Task task, ModelConfig& m) {
    const bool seq2seq = task == Task::headline, layered = task != Task::multiview, tokens = layered && task != Task::images;
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
    if (tokens) parse_token_model(node, task, m);
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

// A string or a list of strings; empty when absent or [] (the resolved form, which checkpoints store).
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

// A list of {"path": ..., "unit": "file" | "block" | "line"} text sources.
std::vector<data::TextSource> parse_sources(ConfigNode& node, const std::string& key, const std::vector<data::TextSource>& fallback,
                                            const Doc& doc) {
    Json fallback_json = Json::array();
    for (const auto& source : fallback) fallback_json.push_back({{"path", source.path}, {"unit", name_of(source.unit)}});
    const Json given = node.raw(key, "list of `{\"path\", \"unit\"}`", fallback_json, doc);
    const Json& list = given.is_null() ? fallback_json : given;
    if (!list.is_array()) node.fail(key, "expected a list of {\"path\": ..., \"unit\": ...} objects");
    std::vector<data::TextSource> sources;
    Json resolved = Json::array();
    for (size_t i = 0; i < list.size(); ++i) {
        ConfigNode item(list[i], node.path_of(key) + "[" + std::to_string(i) + "]");
        data::TextSource source;
        source.path = item.text("path", "", "a text file");
        if (source.path.empty()) item.fail("path", "is required");
        source.unit = item.choice("unit", data::DocumentUnit::block, "what a document is");
        item.finish();
        sources.push_back(source);
        resolved.push_back({{"path", source.path}, {"unit", name_of(source.unit)}});
    }
    node.set_resolved(key, resolved);
    return sources;
}

void parse_data(ConfigNode& node, Task task, DataConfig& d) {
    if (task == Task::headline) {
        d.train_articles = node.text("train_articles", d.train_articles,
                                     "line-aligned training articles (made by `scripts/prepare_data.py`)");
        d.train_titles = node.text("train_titles", d.train_titles, "their titles, line by line");
        d.valid_articles = node.text("valid_articles", d.valid_articles, "validation articles");
        d.valid_titles = node.text("valid_titles", d.valid_titles, "their titles");
        d.max_source = node.integer("max_source", d.max_source, "pieces kept per article", 1, kMaxLength);
        d.max_target = node.integer("max_target", d.max_target,
                                    "decoder positions per title (title pieces kept: `max_target` − 1)", 2, kMaxLength);
        d.shuffle_buffer = node.integer("shuffle_buffer", d.shuffle_buffer,
                                        "examples in memory at once while streaming and shuffling", 1);
    } else if (task == Task::classify || task == Task::span) {
        d.train_file = node.text("train_file", d.train_file,
                                 Doc("classify: a TSV file; span: a SQuAD JSON file", "required"));
        if (d.train_file.empty()) node.fail("train_file", "is required");
        d.valid_file = node.text("valid_file", d.valid_file, "the same for validation; empty: no validation");
        d.max_seq = node.integer("max_seq", d.max_seq,
                                 "pieces per sequence, `[CLS]` and the `[SEP]`s included (classify cuts a pair longest-first)", 8, kMaxLength);
        if (task == Task::classify) {
            d.text_a_column = node.integer("text_a_column", d.text_a_column, "0-based column of the text", 0, 1000);
            d.text_b_column = node.integer("text_b_column", d.text_b_column,
                                           "column of the second text of a pair; −1: single texts", -1, 1000);
            d.label_column = node.integer("label_column", d.label_column, "column of the label", 0, 1000);
            d.header = node.boolean("header", d.header, "the first line names the columns");
            d.regression = node.boolean("regression", d.regression,
                                        "one regression output with the mean squared error (STS-B) instead of classes");
            d.labels = text_list(node, "labels",
                                 "the class names in id order; empty: collected from `train_file` in order of first "
                                 "appearance (the run's resolved config and checkpoints then list them)");
            if (d.regression && !d.labels.empty()) node.fail("labels", "are for classes; a regression target has none");
            d.same_class_templates = parse_same_class_templates(node, d.same_class_templates);
            if (d.regression && d.same_class_templates > 0.0) {
                node.fail("same_class_templates", "needs classes; a regression target has none");
            }
        } else {
            d.doc_stride = node.integer("doc_stride", d.doc_stride, "a window of the context starts every `doc_stride` pieces", 1, kMaxLength);
            d.max_query = node.integer("max_query", d.max_query, "pieces kept of a question", 1, kMaxLength);
            d.max_answer = node.integer("max_answer", d.max_answer, "longest answer in pieces", 1, kMaxLength);
            d.null_threshold = node.number("null_threshold", d.null_threshold,
                                           "SQuAD 2.0: answer \"\" when the null score exceeds the best span's by more than this");
            if (d.max_query + 3 >= d.max_seq) node.fail("max_query", "leaves no room for the context in max_seq pieces");
        }
    } else if (task == Task::synthetic) {
        d.problem = node.choice("problem", d.problem,
                                "paper 002's task: `case_distinction` (if 64 occurs, the position of the minimum; else if 50 "
                                "occurs, position 0; else the position of the maximum, §5.1) or `mode` (the most frequent "
                                "symbol, the smallest on ties, §5.3); fresh random sequences every batch");
        d.symbols = node.integer("symbols", d.problem == data::SyntheticProblem::mode ? 10 : d.symbols,
                                 Doc("S, the alphabet 0 … S−1", "100; `mode`: 10"),
                                 d.problem == data::SyntheticProblem::mode ? 2 : data::kArgminMarker + 1, 100000);
        d.length = node.integer("length", d.length, "N, the training sequences' length", 2, 100000);
        d.valid_length = node.integer("valid_length", d.problem == data::SyntheticProblem::mode ? 256 : d.valid_length,
                                      Doc("the validation and test sequences' length (the paper's generalization test)",
                                          "64; `mode`: 256"),
                                      2, 100000);
        d.valid_batches = node.integer("valid_batches", d.valid_batches, "validation batches of `batch_sentences` rows", 1);
        d.output = node.choice("output", d.problem == data::SyntheticProblem::mode ? data::SyntheticOutput::first_position : d.output,
                               Doc("where the model answers: `every_position` (one logit per position, §5.1) or "
                                   "`first_position` (the first state projected to N positions, §5.2, or to S symbols for `mode`)",
                                   "`every_position`; `mode`: `first_position`"));
        if (d.problem == data::SyntheticProblem::mode && d.output == data::SyntheticOutput::every_position) {
            node.fail("output", "is every_position, but mode finding answers with a symbol: use first_position");
        }
        if (d.output == data::SyntheticOutput::first_position && d.problem == data::SyntheticProblem::case_distinction &&
            d.valid_length > d.length) {
            node.fail("valid_length", "exceeds length: first_position case distinction has one class per training position");
        }
    } else if (task == Task::images) {
        d.train_file = node.text("train_file", d.train_file,
                                 Doc("a CSV file of images: per line the pixels row by row, then the class id (data/images.h)",
                                     "required"));
        if (d.train_file.empty()) node.fail("train_file", "is required");
        d.valid_file = node.text("valid_file", d.valid_file, "the same for validation; empty: no validation");
        d.image_height = node.integer("image_height", d.image_height, "pixels per column", 1, 4096);
        d.image_width = node.integer("image_width", d.image_width, "pixels per row", 1, 4096);
        d.patch = node.integer("patch", d.patch, "the side of the square patches the images are cut into (ViT's); divides both sides",
                               1, 4096);
        if (d.image_height % d.patch != 0 || d.image_width % d.patch != 0) {
            node.fail("patch", std::to_string(d.patch) + " does not divide " + std::to_string(d.image_height) + " × " +
                                   std::to_string(d.image_width));
        }
        d.pixel_max = node.number("pixel_max", d.pixel_max, "the pixels' full scale; the model reads pixel / pixel_max", 1e-12, 1e30);
        d.classes = node.integer("classes", d.classes,
                                 "classes; 0: one more than the largest label of `train_file` (the resolved config then says)", 0,
                                 1000);
        d.same_class_templates = parse_same_class_templates(node, d.same_class_templates);
    } else if (task == Task::multiview) {
        d.objects_min = node.integer("objects_min", d.objects_min, "fewest objects in a scene", 1, 100);
        d.objects_max = node.integer("objects_max", d.objects_max,
                                     "most objects in a scene (each secondary view has one box per object, up to 100)",
                                     d.objects_min, 100);
        d.colors = node.integer("colors", d.colors, "K, the objects' colors", 2, 64);
        d.count_classes = node.integer("count_classes", d.count_classes,
                                       "the count of color-0 objects is a class 0 … C−2, or C−1 for that many or more", 2, 101);
        d.primary_recall = node.number("primary_recall", d.primary_recall,
                                       "the chance the primary view detects an object (the marked one always)", 1e-3, 1.0);
        d.valid_batches = node.integer("valid_batches", d.valid_batches, "validation batches of `batch_sentences` rows", 1);
    } else {
        d.train_sources = parse_sources(node, "train_sources", d.train_sources,
                                        "text files; `unit` is what a document is: the whole `file`, a blank-line "
                                        "separated `block`, or a `line`");
        d.valid_sources = parse_sources(node, "valid_sources", d.valid_sources,
                                        "held-out text for the validation loss; empty: no validation");
        d.max_seq = node.integer("max_seq", d.max_seq, "pieces per sequence, `[CLS]` and the `[SEP]`s included", 8, kMaxLength);
        d.masking.mask_prob = node.number("mask_prob", d.masking.mask_prob,
                                          "fraction of tokens selected for prediction (80 % `[MASK]`, 10 % random, 10 % kept)",
                                          0.0, 1.0);
        d.masking.max_ngram = static_cast<int>(node.integer(
            "max_ngram", d.masking.max_ngram, "n-gram masking of whole words with p(n) ∝ 1/n over n ≤ `max_ngram` (ALBERT)", 1, 3));
        d.masking.max_predictions = node.integer("max_predictions", d.masking.max_predictions,
                                                 "at most this many tokens selected per sequence (BERT's "
                                                 "`max_predictions_per_seq`, 20 at 128 tokens): an n-gram that would "
                                                 "pass it is left out; 0: no cap",
                                                 0);
    }
    d.batch_sentences = node.integer("batch_sentences", d.batch_sentences, "rows per batch; 0: no limit", 0, kMaxRows);
    d.batch_tokens = node.integer("batch_tokens", d.batch_tokens, "padded tokens per batch (rows × padded length); 0: no limit", 0, kMaxBatchTokens);
    d.pad_multiple = node.integer("pad_multiple", d.pad_multiple,
                                  "a batch of token rows is padded to its longest row rounded up to a multiple of this (at "
                                  "most the longest row allowed): a few batch shapes instead of one per length, whose tensor "
                                  "blocks and matmul primitives later batches reuse (docs/performance.md, issue #24); the loss "
                                  "and attention mask the padding; 1: pad to the longest row",
                                  1, 128);
    if (d.batch_sentences == 0 && d.batch_tokens == 0) node.fail("batch_sentences", "and batch_tokens cannot both be 0");
    d.damaged_lines = node.choice("damaged_lines", d.damaged_lines,
                                  "a text line with invalid UTF-8 or a control byte (NUL and other C0 codes except tab; a CR "
                                  "only as a CRLF line ending), as a crash leaves in a file: `\"reject\"` stops before the run "
                                  "writes anything, naming file and line; `\"skip\"` leaves such lines out (a headline pair "
                                  "when either line is damaged) and logs their count per file");
}

void parse_train(ConfigNode& node, Task task, TrainConfig& t) {
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
    if (task == Task::headline) {
        t.label_smoothing = node.number("label_smoothing", t.label_smoothing, "target distribution (1−ε)·one-hot + ε/V", 0.0, 0.99);
    }
    if (task == Task::mlm) {
        t.sentence_order_weight = node.number(
            "sentence_order_weight", t.sentence_order_weight,
            "weight of ALBERT's sentence-order loss (a 2-way head on the pooled `[CLS]`: are segments A and B swapped?) "
            "beside the masked-LM loss; 0: no sentence-order head",
            0.0, 100.0);
    }
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

// The metrics each task reports, the first the default (headline's rouge_l needs decoded headlines).
std::vector<std::string> metrics_of(Task task, bool regression) {
    switch (task) {
        case Task::headline: return {"rouge_l", "loss"};
        case Task::mlm: return {"loss", "mlm_accuracy", "sop_accuracy"};
        case Task::classify: return regression ? std::vector<std::string>{"pearson", "loss", "spearman"}
                                               : std::vector<std::string>{"accuracy", "loss", "f1", "mcc"};
        case Task::span: return {"f1", "loss", "exact_match"};
        case Task::synthetic:
            return {"accuracy", "loss", "accuracy_at_train_length", "accuracy_argmin", "accuracy_first", "accuracy_argmax"};
        case Task::multiview: return {"accuracy", "loss", "accuracy_color", "accuracy_count"};
        case Task::images: return {"accuracy", "loss"};
    }
    return {};
}

void parse_validation(ConfigNode& node, Task task, const DataConfig& data, ValidationConfig& v) {
    v.every = node.integer("every", v.every, "steps between validations (and one at the end); 0: only at the end", 0);
    v.max_batches = node.integer("max_batches", v.max_batches, "validation batches for the loss; 0: all", 0);
    if (task == Task::headline) {
        v.decode_examples = node.integer("decode_examples", v.decode_examples,
                                         "validation articles decoded greedily and scored with ROUGE-L F1", 0);
        v.max_decode_length = node.integer("max_decode_length", v.max_decode_length, "longest decoded headline", 1);
    }
    // ROUGE-L needs decoded headlines: without them the loss picks the best checkpoint.
    const std::string fallback = task == Task::headline && v.decode_examples == 0 ? "loss" : metrics_of(task, data.regression)[0];
    v.metric = node.choice("metric", fallback,
                           Doc("what selects `best.ckpt` and drives early stopping: `\"loss\"` is better lower, every "
                               "other metric higher (`f1` of classify: two classes; `sop_accuracy` needs "
                               "`train.sentence_order_weight` > 0)",
                               "the first listed (headline: `\"loss\"` when `decode_examples` is 0)"),
                           metrics_of(task, data.regression));
    v.patience = node.integer("patience", v.patience, "stop after this many validations without improvement; 0: never", 0);
}

void parse_checkpoint(ConfigNode& node, CheckpointConfig& c) {
    c.every = node.integer("every", c.every,
                           "steps between checkpoints (one is also written at the end, on SIGINT/SIGTERM and on `--stop-after`)", 1);
    c.keep = node.integer("keep", c.keep, "step checkpoints kept in `RUN_DIR/checkpoints/`; `best.ckpt` is kept besides", 1);
}

void parse_test(ConfigNode& node, Task task, const DataConfig& data, TestConfig& t) {
    t.checkpoint = node.choice("checkpoint", t.checkpoint,
                               "the checkpoint `hnas test` scores: `\"best\"` (`best.ckpt`; the newest step checkpoint when "
                               "the run never validated) or `\"last\"` (the newest step checkpoint)");
    if (task == Task::headline) {
        t.articles = node.text("articles", t.articles, "test articles, one per line (the standard Gigaword test set)");
        t.references = node.text("references", t.references, "their reference headlines");
        t.wordnet = node.text("wordnet", t.wordnet, "the folder of WordNet 2.0's exception lists that ROUGE-1.5.5's -m stemming reads");
        DecodingConfig& d = t.decoding;
        d.beam = node.integer("beam", d.beam, "beam size of the test decoding (1: greedy); also `hnas decode`'s and `hnas eval`'s", 1);
        d.length_penalty = node.number("length_penalty", d.length_penalty,
                                       "A: hypotheses ranked by log P / (tokens + 1)^A (0: plain log P)", 0.0);
        d.min_length = node.integer("min_length", d.min_length, "fewest tokens before eos", 0);
        d.max_length = node.integer("max_length", d.max_length, "most tokens before eos", 1);
        d.no_repeat_ngram = node.integer("no_repeat_ngram", d.no_repeat_ngram, "no n-gram of this size twice (0: off)", 0);
        t.batch = node.integer("batch", t.batch, "articles decoded together", 1);
    } else if (task == Task::synthetic || task == Task::multiview) {
        t.batches = node.integer("batches", t.batches,
                                 "test batches of `data.batch_sentences` rows (synthetic: at `data.valid_length`), from a "
                                 "stream of their own (the same for every run and seed, so settings are compared on the same "
                                 "examples)",
                                 1);
    } else if (task == Task::classify || task == Task::span || task == Task::images) {
        t.file = node.text("file", t.file, Doc("the labelled test file, in the training file's format", "`data.valid_file`"));
        if (t.file.empty()) {
            t.file = data.valid_file;
            node.set_resolved("file", t.file);
        }
    }
}

}  // namespace

// Paper 002's defaults (§4 and the authors' train.py and models.py): d 128, 4 heads, 2 layers, FFN 4·d
// (the parser's default), every matrix from a truncated normal of stddev 0.02, no dropout, 3,200
// batches of 32 with Adam (Keras's: ε 1e-7, no weight decay) at 0.3^7 decaying linearly to 0 (the
// schedule's default, no warm-up) without clipping, Keras's layer-norm ε 1e-3, validation every 100.
ExperimentConfig synthetic_defaults(ExperimentConfig config) {
    models::ModelConfig& m = config.model;
    m.architecture = models::Architecture::symbols;
    m.width = 128;
    m.heads = 4;
    m.encoder_layers = 2;
    m.embedding_dropout = m.attention_dropout = m.residual_dropout = m.ffn_dropout = 0.0f;
    m.scale_embeddings = false;
    m.layer_norm_eps = 1e-3f;
    m.weight_init = models::WeightInit::truncated_normal;
    TrainConfig& t = config.train;
    t.optimizer.weight_decay = 0.0f;
    t.optimizer.epsilon = 1e-7f;
    t.schedule.learning_rate = 2.187e-4;  // 0.3^7
    t.steps = 3200;
    t.clip_norm = 0.0;
    t.log_every = 100;
    config.validation.every = 100;
    config.checkpoint.every = 800;
    return config;
}

// The multi-view task (paper 004 App. B used one head, Adam and a searched attention dropout): d 64
// features, a readout of 4 · 64, no dropout, 10,000 batches of 32 at 3e-3 with warm-up and linear decay
// (at 1e-3 or 3,000 batches LNAS had not yet learned to align the views).
ExperimentConfig multiview_defaults(ExperimentConfig config) {
    models::ModelConfig& m = config.model;
    m.architecture = models::Architecture::multiview;
    m.width = 64;
    m.heads = 1;
    m.attention_dropout = 0.0f;
    TrainConfig& t = config.train;
    t.optimizer.weight_decay = 0.0f;
    t.schedule.learning_rate = 3e-3;
    t.schedule.warmup_steps = 100;
    t.steps = 10000;
    t.log_every = 200;
    config.validation.every = 1000;
    config.checkpoint.every = 2500;
    return config;
}

// The images task: a ViT of paper 003 §9's depth (six layers) at the width of the 8 × 8 digits: d 64,
// 4 heads, pre-LN as ViT has it, patches of 2 × 2.
ExperimentConfig images_defaults(ExperimentConfig config) {
    models::ModelConfig& m = config.model;
    m.architecture = models::Architecture::vit;
    m.width = 64;
    m.heads = 4;
    m.encoder_layers = 6;
    m.norm = nn::NormPlacement::pre;
    return config;
}

ExperimentConfig defaults_for(Task task) {
    ExperimentConfig config;
    config.task = task;
    if (task == Task::synthetic) return synthetic_defaults(config);
    if (task == Task::multiview) return multiview_defaults(config);
    if (task == Task::images) return images_defaults(config);
    if (task != Task::headline) config.model = models::bert_base();
    if (task == Task::span) config.data.max_seq = 384;
    return config;
}

void set_task_output(ExperimentConfig& config) {
    if (config.task == Task::images) {
        const DataConfig& d = config.data;
        config.model.image = {(d.image_height / d.patch) * (d.image_width / d.patch), d.patch * d.patch, d.classes};
        config.model.max_source_positions = config.model.image.patches + 1;  // and the class token
        return;
    }
    if (config.task == Task::multiview) {
        config.model.multiview_classes = config.data.colors * config.data.count_classes;
        return;
    }
    if (config.task != Task::synthetic) return;
    const DataConfig& d = config.data;
    models::SymbolOutput& output = config.model.symbol_output;
    output.per_position = d.output == data::SyntheticOutput::every_position;
    output.positions = d.problem == data::SyntheticProblem::case_distinction;
    output.classes = output.per_position ? 0 : output.positions ? d.length : d.symbols;
    config.model.max_source_positions = std::max(d.length, d.valid_length);
}

void set_bert_heads(ExperimentConfig& config) {
    models::BertHeads& heads = config.model.bert_heads;
    heads.masked_lm = config.task == Task::mlm;
    heads.sentence_order = config.task == Task::mlm && config.train.sentence_order_weight > 0.0f;
    heads.classes = config.task != Task::classify ? 0
                    : config.data.regression      ? 1
                                                  : static_cast<int64_t>(config.data.labels.size());
    heads.span = config.task == Task::span;
}

Json upgrade_saved_config(Json saved) {
    if (!saved.contains("model") || !saved["model"].contains("attention")) return saved;
    for (auto& [stack_name, stack] : saved["model"]["attention"].items()) {
        if (!stack.is_object() || !stack.contains("ot_alpha")) continue;
        const double alpha = stack.at("ot_alpha").get<double>();
        const Json kinds = stack.contains("kind") ? stack.at("kind") : Json("lnas");
        const auto is_ot = [](const Json& kind) { return kind == "ot"; };
        const bool only_ot = kinds.is_array() ? std::all_of(kinds.begin(), kinds.end(), is_ot) : is_ot(kinds);
        HNAS_CHECK(alpha == 1.0 || only_ot, "config model.attention.", stack_name, ".ot_alpha: ", alpha, " was saved by an earlier ",
                   "hnas, where it weighed only `ot`'s evidence; today `alpha` weighs every kind's, so a stack mixing `ot` with ",
                   "other kinds has no equivalent");
        if (alpha != 1.0) stack["alpha"] = alpha;
        stack.erase("ot_alpha");
    }
    return saved;
}

ExperimentConfig parse_experiment_config(const Json& raw, KeyLog* log) {
    ConfigNode root(raw, "", log);
    const Task task = root.choice("task", Task::headline,
                                  "headline generation (encoder-decoder), masked-LM pretraining (BERT-style encoder), "
                                  "fine-tuning a BERT-style encoder on classification (GLUE-style TSV) or extractive "
                                  "question answering (SQuAD JSON), paper 002's `synthetic` tasks, paper 004's "
                                  "`multiview` attention on synthetic scenes, or paper 003's `images` (a ViT on small images); "
                                  "the task layer is `src/tasks/`");
    ExperimentConfig config = defaults_for(task);
    config.seed = static_cast<uint64_t>(root.integer(
        "seed", static_cast<int64_t>(config.seed), "seeds initialization, dropout and data order (separate streams)", 0));
    ConfigNode model = root.child("model", "the model, below");
    parse_model(model, task, config.model);
    root.finish_child("model", model);
    config.init_from = root.text(
        "init_from", config.init_from,
        "a checkpoint a new run starts from (ignored on `--resume`). headline: an MLM checkpoint to start encoder and decoder "
        "from (⟨BERT,BERT⟩), cross-attention fresh; every other task: the parameters it holds by name (a pretrained "
        "encoder; heads it lacks start fresh, each logged). Without `tokenizer.model` the run uses this checkpoint's tokenizer");
    ConfigNode tokenizer = root.child("tokenizer", "the tokenizer, below; it travels inside every checkpoint");
    parse_tokenizer(tokenizer, config.tokenizer);
    root.finish_child("tokenizer", tokenizer);
    ConfigNode data = root.child("data", "training and validation data, below; paths are relative to where `hnas` runs");
    parse_data(data, task, config.data);
    root.finish_child("data", data);
    ConfigNode train = root.child("train", "optimization, below");
    parse_train(train, task, config.train);
    root.finish_child("train", train);
    set_bert_heads(config);
    set_task_output(config);
    ConfigNode validation = root.child("validation", "validation cadence and metric, below");
    parse_validation(validation, task, config.data, config.validation);
    if (config.validation.metric == "rouge_l" && config.validation.decode_examples == 0) {
        validation.fail("metric", "is rouge_l, which needs decode_examples > 0");
    }
    if (config.validation.metric == "sop_accuracy" && !config.model.bert_heads.sentence_order) {
        validation.fail("metric", "is sop_accuracy, which needs train.sentence_order_weight > 0");
    }
    root.finish_child("validation", validation);
    ConfigNode checkpoint = root.child("checkpoint", "checkpoint cadence, below");
    parse_checkpoint(checkpoint, config.checkpoint);
    root.finish_child("checkpoint", checkpoint);
    ConfigNode test = root.child("test", "what `hnas test` scores a finished run on (the result of a sweep's trial), below; "
                                         "mlm: the validation loss of `data.valid_sources`");
    parse_test(test, task, config.data, config.test);
    root.finish_child("test", test);
    root.finish();
    config.resolved = root.resolved();
    return config;
}

ExperimentConfig load_experiment_config(const std::string& path, const std::vector<std::string>& overrides) {
    Json raw = read_config_file(path);
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
