#include "tasks/synthetic/synthetic_options.h"

#include <algorithm>

#include "tasks/task_options.h"

namespace hnas::tasks::synthetic {

namespace {

using config::ConfigNode;
using config::Doc;

// Paper 002's defaults (§4 and the authors' train.py and models.py): d 128, 4 heads, 2 layers, FFN 4·d
// (the parser's default), every matrix from a truncated normal of stddev 0.02, no dropout, 3,200
// batches of 32 with Adam (Keras's: ε 1e-7, no weight decay) at 0.3^7 decaying linearly to 0 (the
// schedule's default, no warm-up) without clipping, Keras's layer-norm ε 1e-3, validation every 100.
void defaults(config::ExperimentConfig& config) {
    models::ModelConfig& m = config.model;
    m.architecture = models::Architecture::symbols;
    m.width = 128;
    m.heads = 4;
    m.encoder_layers = 2;
    m.embedding_dropout = m.attention_dropout = m.residual_dropout = m.ffn_dropout = 0.0f;
    m.scale_embeddings = false;
    m.layer_norm_eps = 1e-3f;
    m.weight_init = models::WeightInit::truncated_normal;
    config::TrainConfig& t = config.train;
    t.optimizer.weight_decay = 0.0f;
    t.optimizer.epsilon = 1e-7f;
    t.schedule.learning_rate = 2.187e-4;  // 0.3^7
    t.steps = 3200;
    t.clip_norm = 0.0;
    t.log_every = 100;
    config.validation.every = 100;
    config.checkpoint.every = 800;
    install_default_options<SyntheticOptions>(config);
}

void parse_data(ConfigNode& node, SyntheticOptions& o) {
    o.problem = node.choice("problem", o.problem,
                            "paper 002's task: `case_distinction` (if 64 occurs, the position of the minimum; else if 50 "
                            "occurs, position 0; else the position of the maximum, §5.1) or `mode` (the most frequent "
                            "symbol, the smallest on ties, §5.3); fresh random sequences every batch");
    o.symbols = node.integer("symbols", o.problem == data::SyntheticProblem::mode ? 10 : o.symbols,
                             Doc("S, the alphabet 0 … S−1", "100; `mode`: 10"),
                             o.problem == data::SyntheticProblem::mode ? 2 : data::kArgminMarker + 1, 100000);
    o.length = node.integer("length", o.length, "N, the training sequences' length", 2, 100000);
    o.valid_length = node.integer("valid_length", o.problem == data::SyntheticProblem::mode ? 256 : o.valid_length,
                                  Doc("the validation and test sequences' length (the paper's generalization test)",
                                      "64; `mode`: 256"),
                                  2, 100000);
    o.valid_batches = node.integer("valid_batches", o.valid_batches, "validation batches of `batch_sentences` rows", 1);
    o.output = node.choice("output", o.problem == data::SyntheticProblem::mode ? data::SyntheticOutput::first_position : o.output,
                           Doc("where the model answers: `every_position` (one logit per position, §5.1) or "
                               "`first_position` (the first state projected to N positions, §5.2, or to S symbols for `mode`)",
                               "`every_position`; `mode`: `first_position`"));
    if (o.problem == data::SyntheticProblem::mode && o.output == data::SyntheticOutput::every_position) {
        node.fail("output", "is every_position, but mode finding answers with a symbol: use first_position");
    }
    if (o.output == data::SyntheticOutput::first_position && o.problem == data::SyntheticProblem::case_distinction &&
        o.valid_length > o.length) {
        node.fail("valid_length", "exceeds length: first_position case distinction has one class per training position");
    }
}

// The model's output and positions follow the problem and the lengths.
void set_model_output(const SyntheticOptions& o, models::ModelConfig& model) {
    models::SymbolOutput& output = model.symbol_output;
    output.per_position = o.output == data::SyntheticOutput::every_position;
    output.positions = o.problem == data::SyntheticProblem::case_distinction;
    output.classes = output.per_position ? 0 : output.positions ? o.length : o.symbols;
    model.max_source_positions = std::max(o.length, o.valid_length);
}

void parse(config::TaskSections& sections, config::ExperimentConfig& config) {
    SyntheticOptions& o = options_of<SyntheticOptions>(config, schema());
    parse_data(sections.data, o);
    o.test_batches = parse_test_batches(sections.test, o.test_batches);
    set_model_output(o, config.model);
}

std::vector<std::string> metrics(const config::ExperimentConfig&) {
    return {"accuracy", "loss", "accuracy_at_train_length", "accuracy_argmin", "accuracy_first", "accuracy_argmax"};
}

}  // namespace

const config::TaskSchema& schema() {
    static const config::TaskSchema synthetic{
        .name = "synthetic",
        .description = "paper 002's synthetic tasks (case distinction, mode finding) for a symbol encoder",
        .defaults = defaults,
        .parse = parse,
        .metrics = metrics,
        .key_table_variants = nullptr,
    };
    return synthetic;
}

const SyntheticOptions& options(const config::ExperimentConfig& config) { return options_of<SyntheticOptions>(config, schema()); }

}  // namespace hnas::tasks::synthetic
