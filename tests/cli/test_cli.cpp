// The hnas command line as a user meets it, run as a subprocess: its exit statuses (README, "Exit
// statuses") — 0, 1 for an error, 2 for a rejected command line, 128 + N when signal N stopped a
// training run after its checkpoint — and numeric options whose errors name the option and a range
// that the rejected value is really outside of.
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "backend/matmul.h"
#include "io/checkpoint.h"
#include "io/safetensors.h"
#include "test_support.h"

namespace hnas {
namespace {

namespace fs = std::filesystem;

using testing::Outcome;

// The files of this suite, removed at its end.
const testing::ScratchDir& scratch() {
    static const testing::ScratchDir dir("hnas_cli_test_");
    return dir;
}

Outcome run_hnas(const std::vector<std::string>& args) { return testing::run_hnas(args, scratch()); }

// ---- numeric options -----------------------------------------------------------------------------------

struct BadValue {
    std::vector<std::string> args;
    std::string message;  // the whole error line CLI11 prints, option name first
};

// A representative set over every subcommand and every kind of range: positive and non-negative
// integers, bounded integers, positive, bounded and finite numbers, values too large for the option's
// type, text that is no number. Required file options point at a file that exists, so that the option
// under test is the one rejected.
TEST(CommandLine, NumericOptionsStateTheirRealRange) {
    const std::string file = (scratch().root / "some.txt").string();
    std::ofstream(file) << "a line\n";
    const std::vector<std::string> decode{"decode", "--checkpoint", file, "--input", file, "--output", file};
    auto with = [](std::vector<std::string> base, std::initializer_list<std::string> more) {
        base.insert(base.end(), more);
        return base;
    };
    const std::vector<BadValue> cases{
        {with(decode, {"--beam", "0"}), "--beam: must be a positive integer, got 0"},
        {with(decode, {"--beam", "-4"}), "--beam: must be a positive integer, got -4"},
        {with(decode, {"--beam", "four"}), "--beam: must be a positive integer, got four"},
        {with(decode, {"--beam", "2.5"}), "--beam: must be a positive integer, got 2.5"},
        // CLI11 alone would take this for octal 8.
        {with(decode, {"--beam", "010"}), "--beam: must be a positive integer written without leading zeros, got 010"},
        {with(decode, {"--min-len", "-1"}), "--min-len: must be a non-negative integer, got -1"},
        {with(decode, {"--length-penalty", "nan"}), "--length-penalty: must be a finite number, got nan"},
        {with(decode, {"--length-penalty", "1e999"}),
         "--length-penalty: must be a finite number no larger in magnitude than 1.7976931348623157e+308, got 1e999"},
        {with(decode, {"--precision", "fp16"}), "--precision: must be \"f32\" or \"bf16\", got \"fp16\""},
        {with(decode, {"--batch", "99999999999999999999"}),
         "--batch: must be a positive integer no larger than 9223372036854775807, got 99999999999999999999"},
        {{"rouge", "--hyp", file, "--ref", file, "--bootstrap", "-1"}, "--bootstrap: must be a non-negative integer, got -1"},
        {{"rouge", "--hyp", file, "--ref", file, "--seed", "-1"}, "--seed: must be a non-negative integer, got -1"},
        {{"vocab", "--input", file, "--model-prefix", file, "--vocab-size", "5"},
         "--vocab-size: must be an integer in [16, 1000000], got 5"},
        {{"train", "--config", file, "--stop-after", "0"}, "--stop-after: must be a positive integer, got 0"},
        {{"demo", "--lr", "0"}, "--lr: must be a positive number, got 0"},
        {{"demo", "--lr", "1e39"}, "--lr: must be a positive number no larger in magnitude than 3.4028235e+38, got 1e39"},
        {{"demo", "--steps", "3000000000"}, "--steps: must be a positive integer no larger than 2147483647, got 3000000000"},
        {{"inspect", file, "--vocab-size", "0"}, "--vocab-size: must be a positive integer, got 0"},
        {{"analyze", "explain-away", "--checkpoint", file, "--input", file, "--epsilon", "0"},
         "--epsilon: must be a positive number, got 0"},
        {{"toy", "mode-collapse", "--hybrid-u", "1.5"}, "--hybrid-u: must be a number in [0, 1], got 1.5"},
        {{"toy", "mode-collapse", "--spread", "-0.1"}, "--spread: must be a non-negative number, got -0.1"},
        {{"toy", "centre-distance", "--curve-points", "1"}, "--curve-points: must be an integer of at least 2, got 1"},
        {{"toy", "centre-distance", "--a", "1", "-1"}, "--a: must be a positive number, got -1"},
    };
    for (const BadValue& bad : cases) {
        const Outcome outcome = run_hnas(bad.args);
        EXPECT_EQ(outcome.exit_code(), 2) << testing::describe_status(outcome.status) << "\n" << outcome.output;
        EXPECT_CONTAINS(outcome.output, bad.message + "\n");
    }
}

// Values at the edges of the ranges pass as written.
TEST(CommandLine, ValuesInRangeAreAcceptedAsWritten) {
    const Outcome outcome = run_hnas({"toy", "mode-collapse", "--n0", "10", "--n1", "+1", "--steps", "0", "--hybrid-u",
                                      "1", "--min-cluster-fraction", "0", "--spread", "0", "--scale", "2.5e-1", "--kinds",
                                      "hnas"});
    EXPECT_EQ(outcome.exit_code(), 0) << outcome.output;
    EXPECT_CONTAINS(outcome.output, "mode collapse: 10 vs 1 points, spread 0, score scale 0.25,");
}

// `hnas tokenize` prints hnas's WordPiece ids as vocab.txt rows (or the pieces), a line per line, Gigaword's
// UNK marker as [UNK]; `hnas hidden-states` writes every layer's states of the real tokens
// (scripts/bert_parity.py reads both: the ids with --wordpiece, the states without).
TEST(CommandLine, TokenizeAndHiddenStatesOfAnImportedBert) {
    const std::string fixture = std::string(HNAS_SOURCE_DIR) + "/tests/fixtures/hf_bert";
    const std::string text = (scratch().root / "bert_lines.txt").string();
    std::ofstream(text) << "Call me Ishmael.\nthe whales UNK\n\n";
    const Outcome ids = run_hnas({"tokenize", "--vocab", fixture + "/vocab.txt", "--input", text});
    EXPECT_EQ(ids.exit_code(), 0) << ids.output;
    EXPECT_CONTAINS(ids.output, "11 12 13 14\n4 8 16 3\n\n");
    const Outcome pieces = run_hnas({"tokenize", "--vocab", fixture + "/vocab.txt", "--input", text, "--pieces"});
    EXPECT_CONTAINS(pieces.output, "call me ishmael .\nthe whale ##s [UNK]\n\n");

    const std::string checkpoint = (scratch().root / "tiny_bert.ckpt").string();
    ASSERT_EQ(run_hnas({"import-bert", "--weights", fixture + "/model.safetensors", "--vocab", fixture + "/vocab.txt", "--out", checkpoint})
                  .exit_code(),
              0);
    const std::string states = (scratch().root / "states.safetensors").string();
    const std::string precision = backend::bf16_matmul_available() ? "bf16" : "f32";
    const Outcome written = run_hnas({"hidden-states", "--checkpoint", checkpoint, "--input", text, "--out", states, "--batch", "2",
                                      "--precision", precision});
    EXPECT_EQ(written.exit_code(), 0) << written.output;
    const io::SafeTensors file = io::read_safetensors(states);
    EXPECT_EQ(file.tensors.at("lengths").shape(), Shape({3}));
    EXPECT_EQ(file.tensors.at("hidden.0").shape(), Shape({14, 32}));  // 6 + 6 + 2 real tokens
    EXPECT_EQ(file.tensors.at("mean_pooled").shape(), Shape({3, 32}));
    EXPECT_EQ(file.metadata.at("precision"), precision);
    const Outcome rejected = run_hnas({"hidden-states", "--checkpoint", checkpoint, "--input", text, "--out", states, "--precision", "f16"});
    EXPECT_EQ(rejected.exit_code(), 2) << rejected.output;
}

// `hnas weights` on a checkpoint that holds no moments (a shipped encoder) writes the same entries; on a
// file that is no checkpoint it fails naming the file and writes nothing.
TEST(CommandLine, WeightsOfACheckpointAndOfAFileThatIsNone) {
    const std::string encoder = std::string(HNAS_SOURCE_DIR) + "/data/pretrained/pretrain_hnas.ckpt";
    const std::string copy = (scratch().root / "weights_copy.ckpt").string();
    const Outcome written = run_hnas({"weights", "--checkpoint", encoder, "--out", copy});
    EXPECT_EQ(written.exit_code(), 0) << written.output;
    const size_t entries = io::Checkpoint::load(encoder).entries().size();
    EXPECT_CONTAINS(written.output, "weights: wrote " + copy + " (" + std::to_string(entries) + " entries, 0 optimizer moments left out");
    EXPECT_EQ(io::Checkpoint::load(copy).entries().size(), entries);

    const std::string text = (scratch().root / "not_a_checkpoint.txt").string();
    std::ofstream(text) << "a line\n";
    const std::string out = (scratch().root / "never_written.ckpt").string();
    const Outcome refused = run_hnas({"weights", "--checkpoint", text, "--out", out});
    EXPECT_EQ(refused.exit_code(), 1) << refused.output;
    EXPECT_CONTAINS(refused.output, "checkpoint " + text + ": ");
    EXPECT_FALSE(std::filesystem::exists(out));
}

// `hnas inspect` on the configs of tasks whose model reads no tokens, with what training fills in from
// the data (the images' classes: 10 digits), counts the model it builds (docs/experiments/paper003_ot.md: 203 k).
TEST(CommandLine, InspectCountsModelsThatReadNoTokens) {
    const std::string source = HNAS_SOURCE_DIR;
    const Outcome digits = run_hnas({"inspect", source + "/configs/paper003_digits.json", "--set",
                                     "data.train_file=" + source + "/data/digits/train.csv"});
    EXPECT_EQ(digits.exit_code(), 0) << digits.output;
    EXPECT_CONTAINS(digits.output, "parameters: 203082 (0.20 M)");
    EXPECT_CONTAINS(digits.output, "\"classes\": 10");
    const Outcome multiview = run_hnas({"inspect", source + "/configs/paper004_multiview.json"});
    EXPECT_EQ(multiview.exit_code(), 0) << multiview.output;
    EXPECT_CONTAINS(multiview.output, "parameters: ");
}

// `hnas inspect` shows the model of every bundled config, run from the checkout as the README does; a
// config whose vocabulary comes from its tokenizer says where the count came from.
TEST(CommandLine, InspectShowsEveryBundledConfig) {
    const fs::path source = HNAS_SOURCE_DIR;
    const fs::path previous = fs::current_path();
    fs::current_path(source);  // the configs name their data relative to the checkout
    int configs = 0;
    for (const auto& entry : fs::directory_iterator(source / "configs")) {
        if (entry.path().extension() != ".json") continue;
        ++configs;
        const Outcome outcome = run_hnas({"inspect", entry.path().string()});
        EXPECT_EQ(outcome.exit_code(), 0) << entry.path() << "\n" << outcome.output;
        EXPECT_CONTAINS(outcome.output, "parameters: ");
    }
    const Outcome gigaword = run_hnas({"inspect", "configs/gigaword.json"});
    EXPECT_CONTAINS(gigaword.output, "vocabulary: 8000 pieces, from tokenizer.vocab_size (the tokenizer a run trains from its data)");
    const Outcome changed = run_hnas({"inspect", "configs/gigaword.json", "--set", "tokenizer.vocab_size=4000"});
    EXPECT_CONTAINS(changed.output, "vocabulary: 4000 pieces, from tokenizer.vocab_size");
    const Outcome finetune = run_hnas({"inspect", "configs/finetune_sotu_era.json", "--set", "init_from=runs/none/best.ckpt"});
    EXPECT_EQ(finetune.exit_code(), 0) << finetune.output;
    EXPECT_CONTAINS(finetune.output, "until init_from runs/none/best.ckpt exists (its tokenizer decides; --vocab-size sets another)");
    fs::current_path(previous);
    EXPECT_GE(configs, 19);
}

// ---- exit statuses ---------------------------------------------------------------------------------------

TEST(CommandLine, ExitStatusesSayHowTheCommandEnded) {
    EXPECT_EQ(run_hnas({"--version"}).exit_code(), 0);
    EXPECT_EQ(run_hnas({"decode", "--help"}).exit_code(), 0);
    const Outcome unknown = run_hnas({"frobnicate"});
    EXPECT_EQ(unknown.exit_code(), 2) << unknown.output;
    const Outcome missing = run_hnas({"decode"});
    EXPECT_EQ(missing.exit_code(), 2) << missing.output;
    EXPECT_CONTAINS(missing.output, "--checkpoint is required");
    // A command line that parses but names a checkpoint that is none: an error, one line.
    const std::string not_a_checkpoint = (scratch().root / "not_a.ckpt").string();
    std::ofstream(not_a_checkpoint) << "no checkpoint here\n";
    const Outcome failed = run_hnas({"inspect", not_a_checkpoint});
    EXPECT_EQ(failed.exit_code(), 1) << failed.output;
    EXPECT_CONTAINS(failed.output, not_a_checkpoint);
}

// OpenMP threads spin briefly, then sleep (backend::choose_openmp_waiting), unless the user's environment
// says how they wait; --version reports the settings the process runs with.
TEST(CommandLine, OpenmpThreadsSpinBrieflyUnlessTheEnvironmentSaysOtherwise) {
    auto version_with = [](const std::vector<std::pair<std::string, std::string>>& environment) {
        const testing::Subprocess process = testing::start_subprocess(
            {HNAS_EXECUTABLE, "--version"}, (scratch().root / "version.log").string(), environment,
            {"OMP_WAIT_POLICY", "GOMP_SPINCOUNT"});
        EXPECT_EQ(testing::finish(process), 0);
        const std::string output = process.output();
        fs::remove(scratch().root / "version.log");
        return output;
    };
    EXPECT_CONTAINS(version_with({}), "OMP_WAIT_POLICY=PASSIVE, GOMP_SPINCOUNT=" + std::to_string(backend::kOpenmpSpinCount) + ")");
    const std::string active = version_with({{"OMP_WAIT_POLICY", "ACTIVE"}});
    EXPECT_CONTAINS(active, "OMP_WAIT_POLICY=ACTIVE)");
    const std::string spin = version_with({{"GOMP_SPINCOUNT", "7"}});
    EXPECT_CONTAINS(spin, "threads, GOMP_SPINCOUNT=7)");
}

// Log lines carry colour codes only where asked for: the tests' pipe gets plain text under auto, and
// `--color always` (before or after the subcommand) colours it, `never` keeps it plain.
TEST(CommandLine, LogColourOnlyWhereAskedFor) {
    const std::string not_a_checkpoint = scratch().write("colour.ckpt", "no checkpoint here\n");
    const auto coloured = [](const Outcome& outcome) { return outcome.output.find('\x1b') != std::string::npos; };
    const Outcome plain = run_hnas({"inspect", not_a_checkpoint});
    EXPECT_EQ(plain.exit_code(), 1) << plain.output;
    EXPECT_FALSE(coloured(plain)) << plain.output;
    EXPECT_TRUE(coloured(run_hnas({"--color", "always", "inspect", not_a_checkpoint})));
    EXPECT_TRUE(coloured(run_hnas({"inspect", not_a_checkpoint, "--color", "always"})));
    EXPECT_FALSE(coloured(run_hnas({"--color", "never", "inspect", not_a_checkpoint})));
    const Outcome bad = run_hnas({"--color", "sometimes", "inspect", not_a_checkpoint});
    EXPECT_EQ(bad.exit_code(), 2) << bad.output;
    EXPECT_CONTAINS(bad.output, "--color");
}

// A small headline run on the bundled data that trains until a signal stops it, logging every step and
// writing a checkpoint only when it stops.
std::string endless_run_config(const fs::path& dir) {
    const std::string gigaword = std::string(HNAS_SOURCE_DIR) + "/data/gigaword/";
    auto copy_head = [&](const std::string& from, const std::string& to, int lines) {
        return testing::copy_head(gigaword + from, (dir / to).string(), lines);
    };
    const std::string articles = copy_head("train_10k/train.article.txt", "articles.txt", 400);
    const std::string titles = copy_head("train_10k/train.title.txt", "titles.txt", 400);
    const std::string valid_articles = copy_head("valid_1k/valid.article.filter.txt", "valid_articles.txt", 16);
    const std::string valid_titles = copy_head("valid_1k/valid.title.filter.txt", "valid_titles.txt", 16);
    const nlohmann::json config = {
        {"task", "headline"},
        {"seed", 5},
        {"model",
         {{"d_model", 32}, {"heads", 4}, {"ffn_dim", 64}, {"encoder_layers", 1}, {"decoder_layers", 1},
          {"max_source_positions", 48}, {"max_target_positions", 24}}},
        {"tokenizer", {{"vocab_size", 300}}},
        {"data", {{"train_articles", articles}, {"train_titles", titles}, {"valid_articles", valid_articles},
                  {"valid_titles", valid_titles}, {"max_source", 48}, {"max_target", 24}, {"batch_sentences", 16},
                  {"shuffle_buffer", 128}}},
        {"train", {{"steps", 1000000}, {"warmup_steps", 2}, {"log_every", 1}}},
        {"validation", {{"every", 0}}},
        {"checkpoint", {{"every", 1000000}}}};
    const fs::path path = dir / "config.json";
    std::ofstream(path) << config.dump(2);
    return path.string();
}

// Starts the endless run, waits until it trains (its first step is logged, so its signal handlers are
// in place), sends `signal` and expects exit status 128 + signal and a loadable checkpoint of the step
// it stopped at.
void expect_signal_stops_the_run(int signal, const std::string& name) {
    const fs::path dir = scratch().root / name;
    fs::create_directories(dir);
    const fs::path run = dir / "run";
    const testing::Subprocess process = testing::start_subprocess(
        {HNAS_EXECUTABLE, "train", "--config", endless_run_config(dir), "--out", run.string()}, (dir / "train.log").string());
    const bool training = testing::wait_until([&] { return process.ended() || testing::logged_a_record(run.string()); });
    ASSERT_TRUE(training && !process.ended()) << "the run did not start training:\n" << process.output();
    kill(process.pid, signal);
    const int status = testing::finish(process);
    ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 128 + signal)
        << name << ": " << testing::describe_status(status) << ", expected exit status " << 128 + signal << "\n"
        << process.output();
    EXPECT_CONTAINS(process.output(), "received signal " + std::to_string(signal) + ": writing a checkpoint and stopping");
    std::vector<fs::path> checkpoints;
    for (const auto& entry : fs::directory_iterator(run / "checkpoints")) checkpoints.push_back(entry.path());
    ASSERT_EQ(checkpoints.size(), 1u) << process.output();
    const io::Checkpoint checkpoint = io::Checkpoint::load(checkpoints.front().string());
    EXPECT_GE(checkpoint.metadata().at("step").get<int64_t>(), 1);
}

TEST(CommandLine, SigtermStopsTrainingWithStatus143AndACheckpoint) { expect_signal_stops_the_run(SIGTERM, "sigterm"); }

TEST(CommandLine, SigintStopsTrainingWithStatus130AndACheckpoint) { expect_signal_stops_the_run(SIGINT, "sigint"); }

// ---- decoding settings -----------------------------------------------------------------------------------

// `hnas eval` decodes as the checkpoint's run is tested (its config's `test` section) unless a flag says
// otherwise, flag by flag.
TEST(CommandLine, DecodingFlagsLeftUnsetComeFromTheCheckpointsTestSection) {
    const fs::path dir = scratch().root / "decoding";
    fs::create_directories(dir);
    const std::string config_path = endless_run_config(dir);
    nlohmann::json config = nlohmann::json::parse(std::ifstream(config_path));
    config["train"]["steps"] = 2;
    config["checkpoint"]["every"] = 2;
    config["test"] = {{"beam", 3}, {"length_penalty", 0.5}, {"min_length", 2}, {"max_length", 12}, {"no_repeat_ngram", 2}};
    std::ofstream(config_path) << config.dump(2);
    const std::string run = (dir / "run").string();
    const Outcome trained = run_hnas({"train", "--config", config_path, "--out", run});
    ASSERT_EQ(trained.exit_code(), 0) << trained.output;
    const std::vector<std::string> eval{"eval", "--checkpoint", run + "/checkpoints/step-00000002.ckpt", "--articles",
                                        (dir / "valid_articles.txt").string(), "--references",
                                        (dir / "valid_titles.txt").string(), "--report"};
    auto decoding = [&](const std::string& report, std::initializer_list<std::string> flags) {
        std::vector<std::string> args = eval;
        args.push_back((dir / report).string());
        args.insert(args.end(), flags);
        const Outcome outcome = run_hnas(args);
        EXPECT_EQ(outcome.exit_code(), 0) << outcome.output;
        return nlohmann::json::parse(std::ifstream(dir / report)).at("decoding");
    };
    const nlohmann::json configured = decoding("configured.json", {});
    EXPECT_EQ(configured.at("beam"), 3);
    EXPECT_EQ(configured.at("length_penalty"), 0.5);
    EXPECT_EQ(configured.at("min_length"), 2);
    EXPECT_EQ(configured.at("max_length"), 12);
    EXPECT_EQ(configured.at("no_repeat_ngram"), 2);
    EXPECT_EQ(configured.at("precision"), "f32");
    const std::string precision = backend::bf16_matmul_available() ? "bf16" : "f32";
    const nlohmann::json flagged = decoding("flagged.json", {"--beam", "1", "--no-repeat-ngram", "0", "--precision", precision});
    EXPECT_EQ(flagged.at("beam"), 1);
    EXPECT_EQ(flagged.at("no_repeat_ngram"), 0);
    EXPECT_EQ(flagged.at("length_penalty"), 0.5);
    EXPECT_EQ(flagged.at("min_length"), 2);
    EXPECT_EQ(flagged.at("precision"), precision);
}

}  // namespace
}  // namespace hnas
