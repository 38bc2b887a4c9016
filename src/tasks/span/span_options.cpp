#include "tasks/span/span_options.h"

#include "models/model_config.h"

namespace hnas::tasks::span {

namespace {

void defaults(config::ExperimentConfig& config) {
    config.model = models::bert_base();
    config.model.bert_heads = {.masked_lm = false, .span = true};
    install_default_options<SpanOptions>(config);
}

void parse(config::TaskSections& sections, config::ExperimentConfig& config) {
    SpanOptions& o = options_of<SpanOptions>(config, schema());
    config::ConfigNode& node = sections.data;
    o.files = parse_labelled_files(node);
    o.max_seq = node.integer("max_seq", o.max_seq,
                             "pieces per sequence, `[CLS]` and the `[SEP]`s included (classify cuts a pair longest-first)", 8,
                             config::kMaxLength);
    o.doc_stride = node.integer("doc_stride", o.doc_stride, "a window of the context starts every `doc_stride` pieces", 1, config::kMaxLength);
    o.max_query = node.integer("max_query", o.max_query, "pieces kept of a question", 1, config::kMaxLength);
    o.max_answer = node.integer("max_answer", o.max_answer, "longest answer in pieces", 1, config::kMaxLength);
    o.null_threshold = node.number("null_threshold", o.null_threshold,
                                   "SQuAD 2.0: answer \"\" when the null score exceeds the best span's by more than this");
    if (o.max_query + 3 >= o.max_seq) node.fail("max_query", "leaves no room for the context in max_seq pieces");
    o.test_file = parse_test_file(sections.test, o.files);
}

std::vector<std::string> metrics(const config::ExperimentConfig&) { return {"f1", "loss", "exact_match"}; }

std::vector<config::KeyTableVariant> key_table_variants() { return {{"span", {{"data", {{"train_file", "TRAIN"}}}}}}; }

}  // namespace

const config::TaskSchema& schema() {
    static const config::TaskSchema span{
        .name = "span",
        .description = "fine-tuning a BERT-style encoder on extractive question answering (SQuAD JSON)",
        .defaults = defaults,
        .parse = parse,
        .metrics = metrics,
        .key_table_variants = key_table_variants,
    };
    return span;
}

const SpanOptions& options(const config::ExperimentConfig& config) { return options_of<SpanOptions>(config, schema()); }

}  // namespace hnas::tasks::span
