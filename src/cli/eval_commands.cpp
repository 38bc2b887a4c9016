// `hnas rouge`, `hnas decode`, `hnas eval` and `hnas predict`: scoring headlines, generating them from a checkpoint,
// and both at once with a JSON report.
#include <spdlog/spdlog.h>

#include <iostream>
#include <memory>
#include <nlohmann/json.hpp>

#include "backend/matmul.h"
#include "base/atomic_file.h"
#include "base/number_format.h"
#include "base/read_file.h"
#include "cli/commands.h"
#include "command_line/validators.h"
#include "decode/headlines.h"
#include "eval/rouge_report.h"
#include "tasks/headline/headline_decode.h"
#include "tasks/task.h"
#include "tasks/trained_model.h"

namespace hnas::cli {

namespace {

using Json = nlohmann::ordered_json;

const std::string kDefaultWordnet = std::string(HNAS_SOURCE_DIR) + "/data/wordnet";

void add_rouge_options(CLI::App& command, eval::RougeOptions& options) {
    options.wordnet = kDefaultWordnet;
    command.add_flag("--stem", options.stem, "Stem as ROUGE-1.5.5 -m (WordNet exceptions, then Porter)");
    command.add_option("--wordnet", options.wordnet, "Folder with the WordNet 2.0 exception lists");
    command.add_option("--bootstrap", options.bootstrap, "Resamples for 95 % confidence intervals (0: none)")
        ->check(command_line::non_negative_integer<int>());
    command.add_option("--seed", options.seed, "Seed of the bootstrap resampling")->check(command_line::non_negative_integer<uint64_t>());
}

// Decoding flags left unset take the checkpoint's config (its `test` section, whose defaults were
// chosen on the validation pairs), so a model decodes as its run is tested.
void add_decode_options(CLI::App& command, std::string& checkpoint, decode::DecodeSettings& options) {
    command.add_option("--checkpoint", checkpoint, "A checkpoint of hnas train (decode: a headline model)")
        ->required()
        ->check(CLI::ExistingFile);
    command.add_option("--beam", options.beam, "Beam size (1: greedy; default: the checkpoint config's test.beam)")
        ->check(command_line::positive_integer<int64_t>());
    command.add_option("--length-penalty", options.length_penalty,
                       "A: hypotheses ranked by log P / (tokens + 1)^A (0: plain log P; default: test.length_penalty)")
        ->check(command_line::finite_number<double>());
    command.add_option("--min-len", options.min_length, "Fewest tokens before eos (default: test.min_length)")
        ->check(command_line::non_negative_integer<int64_t>());
    command.add_option("--max-len", options.max_length, "Most tokens before eos (default: test.max_length)")
        ->check(command_line::positive_integer<int64_t>());
    command.add_option("--no-repeat-ngram", options.no_repeat_ngram,
                       "Forbid repeating n-grams of this size (0: off; default: test.no_repeat_ngram)")
        ->check(command_line::non_negative_integer<int64_t>());
    command.add_option("--nbest", options.nbest, "Hypotheses per article (≤ beam)")->check(command_line::positive_integer<int64_t>());
    command.add_option("--batch", options.batch, "Articles decoded together")->check(command_line::positive_integer<int64_t>());
    command.add_option("--max-source", options.max_source, "Source pieces kept per article (default: the training config's)")
        ->check(command_line::non_negative_integer<int64_t>());
    command.add_option("--precision", options.precision,
                       "Matrix products in f32 or bf16 (bf16 operands, f32 accumulation; default f32)")
        ->transform(command_line::enum_choices<backend::MatmulPrecision>());
}

}  // namespace

void add_rouge_command(CLI::App& app) {
    struct Options {
        std::string hypotheses, references;
        eval::RougeOptions rouge;
        bool json = false;
    };
    auto options = std::make_shared<Options>();
    auto* command = app.add_subcommand("rouge", "ROUGE-1/2/L of line-aligned files, as ROUGE-1.5.5 -n 2 -a -f A -p 0.5");
    command->add_option("--hyp", options->hypotheses, "Hypotheses, one per line")->required()->check(CLI::ExistingFile);
    command->add_option("--ref", options->references, "References, one per line")->required()->check(CLI::ExistingFile);
    add_rouge_options(*command, options->rouge);
    command->add_flag("--json", options->json, "Print JSON (values in 0-1) instead of the table");
    command->callback([options] {
        const auto report = eval::score_rouge(read_lines(options->hypotheses, "hypotheses"),
                                              read_lines(options->references, "references"), options->rouge);
        std::cout << (options->json ? eval::rouge_json(report).dump(2) + "\n" : eval::rouge_table(report, options->rouge.stem));
    });
}

void add_decode_command(CLI::App& app) {
    struct Options {
        std::string checkpoint, input, output;
        decode::DecodeSettings decode;
    };
    auto options = std::make_shared<Options>();
    auto* command = app.add_subcommand("decode", "Generate headlines for articles with beam search");
    add_decode_options(*command, options->checkpoint, options->decode);
    command->add_option("--input", options->input, "Articles, one per line")->required()->check(CLI::ExistingFile);
    command->add_option("--output", options->output, "Headlines, one per line (n-best: id ||| text ||| score)")->required();
    command->callback([options] {
        const tasks::TrainedCheckpoint trained = tasks::read_trained_checkpoint(options->checkpoint);
        const tasks::headline::DecodeRun run = tasks::headline::decode_file(trained, options->decode, options->input);
        write_file_atomically(options->output, tasks::headline::format_headlines(run));
        spdlog::info("wrote {} ({:.1f} s)", options->output, portable(run.seconds));
    });
}

void add_eval_command(CLI::App& app) {
    struct Options {
        std::string checkpoint, articles, report;
        tasks::EvaluationRequest request;
        decode::DecodeSettings decoding;  // the headline task's, handed to it in request.options
        eval::RougeOptions rouge;
    };
    auto options = std::make_shared<Options>();
    options->rouge.stem = true;
    auto* command = app.add_subcommand(
        "eval", "Score a checkpoint (JSON report): a headline model's decoded headlines with ROUGE (--articles, "
                "--references), a classification or span model on a labelled file (--input)");
    add_decode_options(*command, options->checkpoint, options->decoding);
    command->add_option("--articles", options->articles, "headline: articles, one per line")->check(CLI::ExistingFile);
    command->add_option("--references", options->request.references, "headline: reference headlines, one per line")
        ->check(CLI::ExistingFile);
    command->add_option("--input", options->request.input, "classify: a TSV in the training data's layout; span: SQuAD JSON")
        ->check(CLI::ExistingFile);
    add_rouge_options(*command, options->rouge);
    command->add_flag("!--no-stem", options->rouge.stem, "Score without stemming (stemming is the default here)");
    command->add_option("--hypotheses", options->request.predictions, "Where the headlines go (default: CHECKPOINT.headlines.txt)");
    command->add_option("--report", options->report, "Where the JSON report goes (default: CHECKPOINT.eval.json)");
    command->callback([options] {
        Options& o = *options;
        if (o.report.empty()) o.report = o.checkpoint + ".eval.json";
        if (o.request.predictions.empty()) o.request.predictions = o.checkpoint + ".headlines.txt";
        if (o.request.input.empty()) o.request.input = o.articles;
        o.request.options = {{"decoding", decode::settings_json(o.decoding)}, {"rouge", eval::options_json(o.rouge)}};
        const tasks::TrainedCheckpoint trained = tasks::read_trained_checkpoint(o.checkpoint);
        const tasks::TaskDefinition& definition = tasks::task_definition(*trained.config.task);
        HNAS_CHECK(definition.evaluate, "eval: ", o.checkpoint, " holds a ", trained.config.task->name,
                   " model, which hnas eval does not score");
        const tasks::Evaluation evaluation = definition.evaluate(trained, o.request);
        Json report = {{"checkpoint", o.checkpoint},
                       {"step", trained.step},
                       {"task", trained.config.task->name},
                       {"attention", trained.config.resolved.at("model").at("attention")}};
        report.update(evaluation.report);
        write_file_atomically(o.report, report.dump(2) + "\n");
        std::cout << evaluation.summary;
        spdlog::info("wrote {}", o.report);
    });
}

void add_predict_command(CLI::App& app) {
    struct Options {
        std::string checkpoint, input, output;
    };
    auto options = std::make_shared<Options>();
    auto* command = app.add_subcommand(
        "predict", "Predictions of a classification or span checkpoint: one label (or regression value) per input line, "
                   "or a SQuAD-style answers JSON");
    command->add_option("--checkpoint", options->checkpoint, "A checkpoint of hnas train (task classify or span)")
        ->required()
        ->check(CLI::ExistingFile);
    command->add_option("--input", options->input, "classify: a TSV in the training data's layout (labels not needed); "
                                                   "span: SQuAD JSON")
        ->required()
        ->check(CLI::ExistingFile);
    command->add_option("--output", options->output, "Where the predictions go (default: INPUT.predictions, .json for span)");
    command->callback([options] {
        const tasks::TrainedCheckpoint trained = tasks::read_trained_checkpoint(options->checkpoint);
        const tasks::TaskDefinition& definition = tasks::task_definition(*trained.config.task);
        const char* task = trained.config.task->name;
        HNAS_CHECK(definition.predict, "predict: ", options->checkpoint, " holds a ", task, " model; hnas predict takes ",
                   "classify and span checkpoints",
                   definition.outputs_command ? fmt::format(" ({}: {})", task, definition.outputs_command) : std::string());
        std::string output = options->output;
        if (output.empty()) output = options->input + definition.predictions_suffix;
        write_file_atomically(output, definition.predict(trained, options->input));
        spdlog::info("wrote {}", output);
    });
}

}  // namespace hnas::cli
