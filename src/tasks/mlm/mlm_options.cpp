#include "tasks/mlm/mlm_options.h"

#include "models/model_config.h"
#include "tasks/task_options.h"

namespace hnas::tasks::mlm {

namespace {

using config::ConfigNode;
using config::Doc;

void defaults(config::ExperimentConfig& config) {
    config.model = models::bert_base();
    install_default_options<MlmOptions>(config);
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

void parse(config::TaskSections& sections, config::ExperimentConfig& config) {
    MlmOptions& o = options_of<MlmOptions>(config, schema());
    ConfigNode& node = sections.data;
    o.train_sources = parse_sources(node, "train_sources", o.train_sources,
                                    "text files; `unit` is what a document is: the whole `file`, a blank-line "
                                    "separated `block`, or a `line`");
    o.prepared = node.text("prepared", o.prepared,
                           "a directory `hnas prepare` made of `train_sources` with the run's tokenizer, read memory-mapped in "
                           "their place: the run starts in seconds and its memory does not grow with the corpus "
                           "(docs/data.md); empty: the sources are read and tokenized at the start");
    o.shuffle_sentences = node.integer("shuffle_sentences", o.shuffle_sentences,
                                       "training sentences whose sequences are drawn, shuffled and batched together (one "
                                       "window); a larger corpus is visited window by window (docs/data.md)", 1);
    o.shuffle_regions = node.integer("shuffle_regions", o.shuffle_regions,
                                     "regions of the corpus mixed in one window, each `shuffle_sentences` / `shuffle_regions` "
                                     "consecutive sentences", 1);
    o.valid_sources = parse_sources(node, "valid_sources", o.valid_sources, "held-out text for the validation loss; empty: no validation");
    o.max_seq = node.integer("max_seq", o.max_seq, "pieces per sequence, `[CLS]` and the `[SEP]`s included", 8, config::kMaxLength);
    o.packing = node.choice("packing", o.packing,
                            "what one sequence's sentences may span: one `document` (ALBERT), or the `corpus`, running on "
                            "across documents in corpus order until the sequence is full (RoBERTa's full sentences), "
                            "for corpora of short documents such as Gigaword's one-sentence articles; validation always keeps one "
                            "document per sequence");
    o.masking.mask_prob = node.number("mask_prob", o.masking.mask_prob,
                                      "fraction of tokens selected for prediction (80 % `[MASK]`, 10 % random, 10 % kept) in training; "
                                      "validation always masks with the defaults (0.15, n-grams up to 3, no cap), so its "
                                      "accuracy compares across recipes", 0.0, 1.0);
    o.masking.max_ngram = static_cast<int>(node.integer(
        "max_ngram", o.masking.max_ngram, "n-gram masking of whole words with p(n) ∝ 1/n over n ≤ `max_ngram` (ALBERT)", 1, 3));
    o.masking.max_predictions = node.integer("max_predictions", o.masking.max_predictions,
                                             "at most this many tokens selected per sequence (BERT's "
                                             "`max_predictions_per_seq`, 20 at 128 tokens): an n-gram that would "
                                             "pass it is left out; 0: no cap",
                                             0);
    o.test_sources = parse_sources(sections.test, "sources", o.test_sources,
                                   "held-out text `hnas test` scores as it scores validation (a sweep's rates are chosen on "
                                   "`data.valid_sources`, its result read here); empty: `data.valid_sources`");
    o.sentence_order_weight = sections.train.number(
        "sentence_order_weight", o.sentence_order_weight,
        "weight of ALBERT's sentence-order loss (a 2-way head on the pooled `[CLS]`: are segments A and B swapped?) "
        "beside the masked-LM loss; 0: no sentence-order head",
        0.0, 100.0);
    config.model.bert_heads = {.masked_lm = true, .sentence_order = o.sentence_order_weight > 0.0f};
}

// sop_accuracy needs the sentence-order head.
std::vector<std::string> metrics(const config::ExperimentConfig& config) {
    if (options(config).sentence_order_weight > 0.0f) return {"loss", "mlm_accuracy", "sop_accuracy"};
    return {"loss", "mlm_accuracy"};
}

}  // namespace

const config::TaskSchema& schema() {
    static const config::TaskSchema mlm{
        .name = "mlm",
        .description = "masked-LM pretraining of a BERT-style encoder, with ALBERT's sentence-order prediction",
        .defaults = defaults,
        .parse = parse,
        .metrics = metrics,
        .key_table_variants = nullptr,
    };
    return mlm;
}

const MlmOptions& options(const config::ExperimentConfig& config) { return options_of<MlmOptions>(config, schema()); }

}  // namespace hnas::tasks::mlm
