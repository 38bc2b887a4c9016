#include "tasks/multiview/multiview_options.h"

#include "tasks/task_options.h"

namespace hnas::tasks::multiview {

namespace {

using config::ConfigNode;

// Paper 004 App. B used one head, Adam and a searched attention dropout: d 64 features, a readout of
// 4 · 64, no dropout, 10,000 batches of 32 at 3e-3 with warm-up and linear decay (at 1e-3 or 3,000
// batches LNAS had not yet learned to align the views).
void defaults(config::ExperimentConfig& config) {
    models::ModelConfig& m = config.model;
    m.architecture = models::Architecture::multiview;
    m.width = 64;
    m.heads = 1;
    m.attention_dropout = 0.0f;
    config::TrainConfig& t = config.train;
    t.optimizer.weight_decay = 0.0f;
    t.schedule.learning_rate = 3e-3;
    t.schedule.warmup_steps = 100;
    t.steps = 10000;
    t.log_every = 200;
    config.validation.every = 1000;
    config.checkpoint.every = 2500;
    install_default_options<MultiviewOptions>(config);
}

void parse_data(ConfigNode& node, MultiviewOptions& o) {
    o.objects_min = node.integer("objects_min", o.objects_min, "fewest objects in a scene", 1, 100);
    o.objects_max = node.integer("objects_max", o.objects_max,
                                 "most objects in a scene (each secondary view has one box per object, up to 100)",
                                 o.objects_min, 100);
    o.colors = node.integer("colors", o.colors, "K, the objects' colors", 2, 64);
    o.count_classes = node.integer("count_classes", o.count_classes,
                                   "the count of color-0 objects is a class 0 … C−2, or C−1 for that many or more", 2, 101);
    o.primary_recall = node.number("primary_recall", o.primary_recall,
                                   "the chance the primary view detects an object (the marked one always)", 1e-3, 1.0);
    o.valid_batches = node.integer("valid_batches", o.valid_batches, "validation batches of `batch_sentences` rows", 1);
}

void parse(config::TaskSections& sections, config::ExperimentConfig& config) {
    MultiviewOptions& o = options_of<MultiviewOptions>(config, schema());
    parse_data(sections.data, o);
    o.test_batches = parse_test_batches(sections.test, o.test_batches);
    config.model.multiview_classes = o.colors * o.count_classes;
}

std::vector<std::string> metrics(const config::ExperimentConfig&) { return {"accuracy", "loss", "accuracy_color", "accuracy_count"}; }

}  // namespace

const config::TaskSchema& schema() {
    static const config::TaskSchema multiview{
        .name = "multiview",
        .description = "paper 004's multi-view attention on synthetic scenes (the color and count of marked objects)",
        .defaults = defaults,
        .parse = parse,
        .metrics = metrics,
        .key_table_variants = nullptr,
    };
    return multiview;
}

const MultiviewOptions& options(const config::ExperimentConfig& config) { return options_of<MultiviewOptions>(config, schema()); }

}  // namespace hnas::tasks::multiview
