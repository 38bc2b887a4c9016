// `hnas rouge`, `hnas decode`, `hnas eval` and `hnas predict`: scoring headlines, generating them from a checkpoint,
// and both at once with a JSON report.
#include <spdlog/spdlog.h>

#include <chrono>
#include <fstream>
#include <iostream>
#include <memory>
#include <optional>
#include <nlohmann/json.hpp>

#include "backend/matmul.h"
#include "base/atomic_file.h"
#include "base/number_format.h"
#include "base/read_file.h"
#include "cli/commands.h"
#include "cli/validators.h"
#include "decode/headlines.h"
#include "tasks/trained_model.h"
#include "eval/rouge.h"
#include "io/checkpoint.h"
#include "tasks/headline/headline_options.h"
#include "tasks/span/span_options.h"
#include "tasks/task.h"

namespace hnas::cli {

namespace {

using Json = nlohmann::ordered_json;

const std::string kDefaultWordnet = std::string(HNAS_SOURCE_DIR) + "/data/wordnet";

struct RougeOptions {
    bool stem = false;
    std::string wordnet = kDefaultWordnet;
    int bootstrap = 0;
    uint64_t seed = 1;
};

void add_rouge_options(CLI::App& command, RougeOptions& options) {
    command.add_flag("--stem", options.stem, "Stem as ROUGE-1.5.5 -m (WordNet exceptions, then Porter)");
    command.add_option("--wordnet", options.wordnet, "Folder with the WordNet 2.0 exception lists");
    command.add_option("--bootstrap", options.bootstrap, "Resamples for 95 % confidence intervals (0: none)")
        ->check(non_negative_integer<int>());
    command.add_option("--seed", options.seed, "Seed of the bootstrap resampling")->check(non_negative_integer<uint64_t>());
}

eval::RougeReport score_rouge(const std::vector<std::string>& hypotheses, const std::vector<std::string>& references,
                              const RougeOptions& options) {
    const eval::RougeScorer scorer(options.stem, options.stem ? options.wordnet : "");
    return scorer.score(hypotheses, references, options.bootstrap, options.seed);
}

struct RougeRow {
    const char* name;
    const eval::RougeScore& score;
    const eval::RougeIntervals& intervals;
};

std::vector<RougeRow> rouge_rows(const eval::RougeReport& report) {
    return {{"rouge-1", report.rouge_1, report.rouge_1_ci},
            {"rouge-2", report.rouge_2, report.rouge_2_ci},
            {"rouge-l", report.rouge_l, report.rouge_l_ci}};
}

// {"rouge-1": {"precision", "recall", "f1"[, "f1_ci95"]}, ..., "pairs"} with values in 0-1.
Json rouge_json(const eval::RougeReport& report) {
    Json out;
    for (const auto& row : rouge_rows(report)) {
        auto& entry = out[row.name];
        entry = {{"precision", row.score.precision}, {"recall", row.score.recall}, {"f1", row.score.f1}};
        if (report.bootstrap_samples > 0) entry["f1_ci95"] = {row.intervals.f1.low, row.intervals.f1.high};
    }
    out["pairs"] = report.pairs;
    return out;
}

void print_rouge_table(const eval::RougeReport& report, bool stemmed) {
    fmt::print("ROUGE over {} pairs{} (values in %, 0-100)\n", report.pairs, stemmed ? ", stemmed" : "");
    fmt::print("{:<8} {:>9} {:>9} {:>9}{}\n", "", "precision", "recall", "F1", report.bootstrap_samples ? "   F1 95% CI" : "");
    for (const auto& row : rouge_rows(report)) {
        fmt::print("{:<8} {:>9.2f} {:>9.2f} {:>9.2f}", row.name, portable(100 * row.score.precision),
                   portable(100 * row.score.recall), portable(100 * row.score.f1));
        if (report.bootstrap_samples) {
            fmt::print("   [{:.2f}, {:.2f}]", portable(100 * row.intervals.f1.low), portable(100 * row.intervals.f1.high));
        }
        fmt::print("\n");
    }
}

// Decoding flags left unset take the checkpoint's config (its `test` section, whose defaults were
// chosen on the validation pairs), so a model decodes as its run is tested.
struct DecodeOptions {
    std::string checkpoint;
    std::optional<int64_t> beam, min_length, max_length, no_repeat_ngram;
    std::optional<double> length_penalty;
    int64_t nbest = 1;
    int64_t batch = 32;
    int64_t max_source = 0;  // 0: the training config's
    backend::MatmulPrecision precision = backend::MatmulPrecision::f32;
};

void add_decode_options(CLI::App& command, DecodeOptions& options) {
    command.add_option("--checkpoint", options.checkpoint, "A checkpoint of hnas train (decode: a headline model)")
        ->required()
        ->check(CLI::ExistingFile);
    command.add_option("--beam", options.beam, "Beam size (1: greedy; default: the checkpoint config's test.beam)")
        ->check(positive_integer<int64_t>());
    command.add_option("--length-penalty", options.length_penalty,
                       "A: hypotheses ranked by log P / (tokens + 1)^A (0: plain log P; default: test.length_penalty)")
        ->check(finite_number<double>());
    command.add_option("--min-len", options.min_length, "Fewest tokens before eos (default: test.min_length)")
        ->check(non_negative_integer<int64_t>());
    command.add_option("--max-len", options.max_length, "Most tokens before eos (default: test.max_length)")
        ->check(positive_integer<int64_t>());
    command.add_option("--no-repeat-ngram", options.no_repeat_ngram,
                       "Forbid repeating n-grams of this size (0: off; default: test.no_repeat_ngram)")
        ->check(non_negative_integer<int64_t>());
    command.add_option("--nbest", options.nbest, "Hypotheses per article (≤ beam)")->check(positive_integer<int64_t>());
    command.add_option("--batch", options.batch, "Articles decoded together")->check(positive_integer<int64_t>());
    command.add_option("--max-source", options.max_source, "Source pieces kept per article (default: the training config's)")
        ->check(non_negative_integer<int64_t>());
    command.add_option("--precision", options.precision,
                       "Matrix products in f32 or bf16 (bf16 operands, f32 accumulation; default f32)")
        ->transform(enum_choices<backend::MatmulPrecision>());
}

struct DecodeRun {
    tasks::TrainedModel trained;
    decode::BeamOptions beam;
    std::vector<std::vector<decode::DecodedHeadline>> headlines;
    double seconds = 0;
};

// The checkpoint config's decoding settings with the flags given on top.
decode::BeamOptions beam_options(const DecodeOptions& options, const decode::DecodingConfig& configured) {
    decode::BeamOptions beam;
    static_cast<decode::DecodingConfig&>(beam) = configured;
    beam.beam = options.beam.value_or(beam.beam);
    beam.length_penalty = options.length_penalty.value_or(beam.length_penalty);
    beam.min_length = options.min_length.value_or(beam.min_length);
    beam.max_length = options.max_length.value_or(beam.max_length);
    beam.no_repeat_ngram = options.no_repeat_ngram.value_or(beam.no_repeat_ngram);
    beam.nbest = options.nbest;
    decode::check_beam_options(beam);
    return beam;
}

DecodeRun run_decode(const DecodeOptions& options, const std::string& articles_path) {
    DecodeRun run{tasks::load_trained_model(options.checkpoint), {}, {}, 0};
    const auto& model = run.trained.seq2seq();
    const auto& config = run.trained.config;
    run.beam = beam_options(options, tasks::headline::options(config).decoding);
    const int64_t max_source = options.max_source > 0
                                   ? options.max_source
                                   : tasks::headline::max_source(config);
    const auto articles = read_lines(articles_path, "articles");
    backend::set_matmul_precision(options.precision);
    spdlog::info("decoding {} articles of {} with a model of step {} (beam {}, length penalty {}, min length {}, "
                 "no repeated {}-grams, batch {}, {} matmuls)",
                 articles.size(), articles_path, run.trained.step, run.beam.beam, portable(run.beam.length_penalty),
                 run.beam.min_length, run.beam.no_repeat_ngram, options.batch, name_of(options.precision));
    const auto start = std::chrono::steady_clock::now();
    auto elapsed = [&] { return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count(); };
    size_t reported = 0;
    run.headlines = decode::decode_articles(model, run.trained.tokenizer, articles, run.beam, options.batch, max_source,
                                            [&](size_t done, size_t total) {
                                                if (done == total || done - reported >= 256) {
                                                    reported = done;
                                                    spdlog::info("decoded {}/{} articles ({:.1f} articles/s)", done,
                                                                 total, portable(static_cast<double>(done) / elapsed()));
                                                }
                                            });
    run.seconds = elapsed();
    return run;
}

// One headline per line, or with nbest > 1 the n-best form `id ||| text ||| score` (id from 0).
std::string format_headlines(const DecodeRun& run) {
    const int64_t nbest = run.beam.nbest;
    std::string text;
    for (size_t id = 0; id < run.headlines.size(); ++id) {
        const auto& hypotheses = run.headlines[id];
        if (nbest == 1) {
            text += (hypotheses.empty() ? std::string() : hypotheses.front().text) + "\n";
            continue;
        }
        for (const auto& hypothesis : hypotheses) {
            text += fmt::format("{} ||| {} ||| {:.6f}\n", id, hypothesis.text, portable(hypothesis.score));
        }
    }
    return text;
}

std::vector<std::string> best_headlines(const DecodeRun& run) {
    std::vector<std::string> best;
    for (const auto& hypotheses : run.headlines) best.push_back(hypotheses.empty() ? std::string() : hypotheses.front().text);
    return best;
}

}  // namespace

void add_rouge_command(CLI::App& app) {
    struct Options {
        std::string hypotheses, references;
        RougeOptions rouge;
        bool json = false;
    };
    auto options = std::make_shared<Options>();
    auto* command = app.add_subcommand("rouge", "ROUGE-1/2/L of line-aligned files, as ROUGE-1.5.5 -n 2 -a -f A -p 0.5");
    command->add_option("--hyp", options->hypotheses, "Hypotheses, one per line")->required()->check(CLI::ExistingFile);
    command->add_option("--ref", options->references, "References, one per line")->required()->check(CLI::ExistingFile);
    add_rouge_options(*command, options->rouge);
    command->add_flag("--json", options->json, "Print JSON (values in 0-1) instead of the table");
    command->callback([options] {
        const auto report = score_rouge(read_lines(options->hypotheses, "hypotheses"), read_lines(options->references, "references"),
                                        options->rouge);
        if (options->json) {
            std::cout << rouge_json(report).dump(2) << "\n";
        } else {
            print_rouge_table(report, options->rouge.stem);
        }
    });
}

void add_decode_command(CLI::App& app) {
    struct Options {
        DecodeOptions decode;
        std::string input, output;
    };
    auto options = std::make_shared<Options>();
    auto* command = app.add_subcommand("decode", "Generate headlines for articles with beam search");
    add_decode_options(*command, options->decode);
    command->add_option("--input", options->input, "Articles, one per line")->required()->check(CLI::ExistingFile);
    command->add_option("--output", options->output, "Headlines, one per line (n-best: id ||| text ||| score)")->required();
    command->callback([options] {
        const DecodeRun run = run_decode(options->decode, options->input);
        write_file_atomically(options->output, format_headlines(run));
        spdlog::info("wrote {} ({:.1f} s)", options->output, portable(run.seconds));
    });
}

void add_eval_command(CLI::App& app) {
    struct Options {
        DecodeOptions decode;
        RougeOptions rouge;
        std::string articles, references, hypotheses, input, report;
    };
    auto options = std::make_shared<Options>();
    options->rouge.stem = true;
    auto* command = app.add_subcommand(
        "eval", "Score a checkpoint (JSON report): a headline model's decoded headlines with ROUGE (--articles, "
                "--references), a classification or span model on a labelled file (--input)");
    add_decode_options(*command, options->decode);
    command->add_option("--articles", options->articles, "headline: articles, one per line")->check(CLI::ExistingFile);
    command->add_option("--references", options->references, "headline: reference headlines, one per line")
        ->check(CLI::ExistingFile);
    command->add_option("--input", options->input, "classify: a TSV in the training data's layout; span: SQuAD JSON")
        ->check(CLI::ExistingFile);
    add_rouge_options(*command, options->rouge);
    command->add_flag("!--no-stem", options->rouge.stem, "Score without stemming (stemming is the default here)");
    command->add_option("--hypotheses", options->hypotheses, "Where the headlines go (default: CHECKPOINT.headlines.txt)");
    command->add_option("--report", options->report, "Where the JSON report goes (default: CHECKPOINT.eval.json)");
    command->callback([options] {
        auto& o = *options;
        if (o.report.empty()) o.report = o.decode.checkpoint + ".eval.json";
        const tasks::TrainedCheckpoint trained = tasks::read_trained_checkpoint(o.decode.checkpoint);
        const char* task = trained.config.task->name;
        if (trained.config.task != &tasks::headline::schema()) {
            const tasks::TaskDefinition& definition = tasks::task_definition(*trained.config.task);
            HNAS_CHECK(definition.evaluate, "eval: ", o.decode.checkpoint, " holds a ", task, " model, which hnas eval does not score");
            HNAS_CHECK(!o.input.empty(), "eval: ", o.decode.checkpoint, " holds a ", task, " model: give its labelled data with --input");
            Json report = {{"checkpoint", o.decode.checkpoint},
                           {"step", trained.step},
                           {"task", task},
                           {"attention", trained.config.resolved.at("model").at("attention")},
                           {"input", o.input}};
            report["metrics"] = definition.evaluate(trained, o.input);
            write_file_atomically(o.report, report.dump(2) + "\n");
            for (const auto& [name, value] : report["metrics"].items()) fmt::print("{:<28} {}\n", name, value.dump());
            spdlog::info("wrote {}", o.report);
            return;
        }
        HNAS_CHECK(!o.articles.empty() && !o.references.empty(), "eval: ", o.decode.checkpoint,
                   " holds a headline model: give --articles and --references");
        if (o.hypotheses.empty()) o.hypotheses = o.decode.checkpoint + ".headlines.txt";
        const auto references = read_lines(o.references, "references");
        const DecodeRun run = run_decode(o.decode, o.articles);
        HNAS_CHECK(references.size() == run.headlines.size(), "eval: ", o.articles, " has ", run.headlines.size(),
                   " articles but ", o.references, " has ", references.size(), " references");
        write_file_atomically(o.hypotheses, format_headlines(run));
        const auto report = score_rouge(best_headlines(run), references, o.rouge);
        const auto& beam = run.beam;
        Json out = {{"checkpoint", o.decode.checkpoint},
                    {"step", run.trained.step},
                    {"attention", run.trained.config.resolved.at("model").at("attention")},
                    {"articles", o.articles},
                    {"references", o.references},
                    {"hypotheses", o.hypotheses},
                    {"decoding",
                     {{"beam", beam.beam},
                      {"length_penalty", beam.length_penalty},
                      {"min_length", beam.min_length},
                      {"max_length", beam.max_length},
                      {"no_repeat_ngram", beam.no_repeat_ngram},
                      {"batch", o.decode.batch},
                      {"precision", name_of(o.decode.precision)},
                      {"seconds", run.seconds}}},
                    {"rouge_settings",
                     {{"stem", o.rouge.stem}, {"bootstrap", o.rouge.bootstrap}, {"seed", o.rouge.seed},
                      {"as", "ROUGE-1.5.5 -n 2 -a -f A -p 0.5" + std::string(o.rouge.stem ? " -m" : "")}}},
                    {"rouge", rouge_json(report)}};
        write_file_atomically(o.report, out.dump(2) + "\n");
        print_rouge_table(report, o.rouge.stem);
        spdlog::info("wrote {} and {}", o.hypotheses, o.report);
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
                   "classify and span checkpoints", trained.config.task == &tasks::headline::schema() ? " (headlines: hnas decode)" : "");
        std::string output = options->output;
        if (output.empty()) output = options->input + (trained.config.task == &tasks::span::schema() ? ".predictions.json" : ".predictions");
        write_file_atomically(output, definition.predict(trained, options->input));
        spdlog::info("wrote {}", output);
    });
}

}  // namespace hnas::cli
