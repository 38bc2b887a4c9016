#include "tasks/classify/classify_options.h"

#include "models/model_config.h"

namespace hnas::tasks::classify {

namespace {

void defaults(config::ExperimentConfig& config) {
    config.model = models::bert_base();
    install_default_options<ClassifyOptions>(config);
}

void parse(config::TaskSections& sections, config::ExperimentConfig& config) {
    ClassifyOptions& o = options_of<ClassifyOptions>(config, schema());
    config::ConfigNode& node = sections.data;
    o.files = parse_labelled_files(node);
    o.max_seq = node.integer("max_seq", o.max_seq,
                             "pieces per sequence, `[CLS]` and the `[SEP]`s included (classify cuts a pair longest-first)", 8,
                             config::kMaxLength);
    o.text_a_column = node.integer("text_a_column", o.text_a_column, "0-based column of the text", 0, 1000);
    o.text_b_column = node.integer("text_b_column", o.text_b_column, "column of the second text of a pair; −1: single texts", -1, 1000);
    o.label_column = node.integer("label_column", o.label_column, "column of the label", 0, 1000);
    o.header = node.boolean("header", o.header, "the first line names the columns");
    o.regression = node.boolean("regression", o.regression, "one regression output with the mean squared error (STS-B) instead of classes");
    o.labels = config::text_list(node, "labels",
                                 "the class names in id order; empty: collected from `train_file` in order of first "
                                 "appearance (the run's resolved config and checkpoints then list them)");
    if (o.regression && !o.labels.empty()) node.fail("labels", "are for classes; a regression target has none");
    o.same_class_templates = parse_same_class_templates(node, o.same_class_templates);
    if (o.regression && o.same_class_templates > 0.0) node.fail("same_class_templates", "needs classes; a regression target has none");
    o.test_file = parse_test_file(sections.test, o.files);
    set_heads(config);
}

std::vector<std::string> metrics(const config::ExperimentConfig& config) {
    if (options(config).regression) return {"pearson", "loss", "spearman"};
    return {"accuracy", "loss", "f1", "mcc"};
}

std::vector<config::KeyTableVariant> key_table_variants() {
    const Json files = {{"data", {{"train_file", "TRAIN"}}}};
    Json regression = files;
    regression["data"]["regression"] = true;
    return {{"classify", files}, {"classify with `regression`", regression}};
}

}  // namespace

const config::TaskSchema& schema() {
    static const config::TaskSchema classify{
        .name = "classify",
        .description = "fine-tuning a BERT-style encoder on sentence or sentence-pair classification (GLUE-style TSV)",
        .defaults = defaults,
        .parse = parse,
        .metrics = metrics,
        .key_table_variants = key_table_variants,
    };
    return classify;
}

const ClassifyOptions& options(const config::ExperimentConfig& config) { return options_of<ClassifyOptions>(config, schema()); }

void set_heads(config::ExperimentConfig& config) {
    const ClassifyOptions& o = options(config);
    config.model.bert_heads = {.masked_lm = false, .classes = o.regression ? 1 : static_cast<int64_t>(o.labels.size())};
}

}  // namespace hnas::tasks::classify
