#include "tasks/images/images_options.h"

namespace hnas::tasks::images {

namespace {

using config::ConfigNode;

// A ViT of paper 003 §9's depth (six layers) at the width of the 8 × 8 digits: d 64, 4 heads, pre-LN as
// ViT has it, patches of 2 × 2.
void defaults(config::ExperimentConfig& config) {
    models::ModelConfig& m = config.model;
    m.architecture = models::Architecture::vit;
    m.width = 64;
    m.heads = 4;
    m.encoder_layers = 6;
    m.norm = nn::NormPlacement::pre;
    install_default_options<ImagesOptions>(config);
}

void parse(config::TaskSections& sections, config::ExperimentConfig& config) {
    ImagesOptions& o = options_of<ImagesOptions>(config, schema());
    ConfigNode& node = sections.data;
    o.files = parse_labelled_files(node);
    o.image_height = node.integer("image_height", o.image_height, "pixels per column", 1, 4096);
    o.image_width = node.integer("image_width", o.image_width, "pixels per row", 1, 4096);
    o.patch = node.integer("patch", o.patch, "the side of the square patches the images are cut into (ViT's); divides both sides",
                           1, 4096);
    if (o.image_height % o.patch != 0 || o.image_width % o.patch != 0) {
        node.fail("patch", std::to_string(o.patch) + " does not divide " + std::to_string(o.image_height) + " × " +
                               std::to_string(o.image_width));
    }
    o.pixel_max = node.number("pixel_max", o.pixel_max, "the pixels' full scale; the model reads pixel / pixel_max", 1e-12, 1e30);
    o.classes = node.integer("classes", o.classes,
                             "classes; 0: one more than the largest label of `train_file` (the resolved config then says)", 0,
                             1000);
    o.same_class_templates = parse_same_class_templates(node, o.same_class_templates);
    o.test_file = parse_test_file(sections.test, o.files);
    set_model_output(config);
}

std::vector<std::string> metrics(const config::ExperimentConfig&) { return {"accuracy", "loss"}; }

std::vector<config::KeyTableVariant> key_table_variants() { return {{"images", {{"data", {{"train_file", "TRAIN"}}}}}}; }

}  // namespace

const config::TaskSchema& schema() {
    static const config::TaskSchema images{
        .name = "images",
        .description = "paper 003's image classification with a ViT on small images",
        .defaults = defaults,
        .parse = parse,
        .metrics = metrics,
        .key_table_variants = key_table_variants,
    };
    return images;
}

const ImagesOptions& options(const config::ExperimentConfig& config) { return options_of<ImagesOptions>(config, schema()); }

void set_model_output(config::ExperimentConfig& config) {
    const ImagesOptions& o = options(config);
    config.model.image = {(o.image_height / o.patch) * (o.image_width / o.patch), o.patch * o.patch, o.classes};
    config.model.max_source_positions = config.model.image.patches + 1;  // and the class token
}

}  // namespace hnas::tasks::images
