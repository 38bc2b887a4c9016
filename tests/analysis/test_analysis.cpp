// Trained-model tools: checkpoints load back into models that decode; the explaining-away statistic
// respects Lemma 1 under DNAS and shows explained-away keys under peaked softmax attention; hybrid
// weights come out of checkpoints and run logs; `hnas decode`, `hnas eval` and `hnas analyze` write
// what they promise and fail with messages that name the problem.
#include <sys/wait.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <set>

#include "analysis/explain_away.h"
#include "analysis/hybrid_weights.h"
#include "base/read_file.h"
#include "config/experiment_config.h"
#include "decode/headlines.h"
#include "eval/rouge.h"
#include "io/checkpoint.h"
#include "models/model_factory.h"
#include "models/model_io.h"
#include "tasks/task.h"
#include "test_support.h"

namespace hnas {
namespace {

namespace fs = std::filesystem;
using config::Json;

// A small tokenizer and article file, made once.
class AnalysisEnvironment {
public:
    static const AnalysisEnvironment& get() {
        static const AnalysisEnvironment environment;
        return environment;
    }
    const testing::ScratchDir scratch{"hnas_analysis_test_"};
    std::string tokenizer_path, articles, titles;

    std::string path(const std::string& name) const { return scratch.path(name); }

private:
    AnalysisEnvironment() {
        const std::string gigaword = std::string(HNAS_SOURCE_DIR) + "/data/gigaword/valid_1k/";
        articles = scratch.head_of(gigaword + "valid.article.filter.txt", 40, "articles.txt");
        titles = scratch.head_of(gigaword + "valid.title.filter.txt", 40, "titles.txt");
        data::TokenizerTrainOptions options;
        options.inputs = {articles, titles};
        options.vocab_size = 200;
        tokenizer_path = scratch.train_tokenizer("tokenizer", options);
    }
};

Json model_json(const std::string& task, const std::string& encoder_kind) {
    Json model = {{"vocab_size", 200}, {"d_model", 32}, {"heads", 4}, {"ffn_dim", 48}, {"encoder_layers", 2},
                  {"dropout", {{"embedding", 0.0}, {"attention", 0.0}, {"residual", 0.0}}},
                  {"attention", {{"encoder", {{"kind", encoder_kind}, {"hybrid_init", 0.2}}}}}};
    if (task == "headline") {
        model["decoder_layers"] = 1;
        model["max_source_positions"] = 64;
        model["max_target_positions"] = 16;
    } else {
        model["max_positions"] = 64;
    }
    return {{"task", task}, {"seed", 5}, {"model", model}};
}

// Writes a checkpoint as `hnas train` does (config, vocabulary size, step, tokenizer, parameters).
// `query_key_gain` multiplies the encoder's query and key projections, sharpening its attention.
std::string write_checkpoint(const std::string& name, const Json& raw, float query_key_gain = 1.0f) {
    const auto& env = AnalysisEnvironment::get();
    const config::ExperimentConfig parsed = tasks::parse_config(raw);
    Rng init(parsed.seed, 0), dropout(parsed.seed, 1);
    const auto model = models::build_model(parsed.model, init, dropout);
    for (const auto& named : model->named_parameters()) {
        const bool query_or_key = named.name.find("encoder.layers.") == 0 &&
                                  (named.name.find("q_proj.weight") != std::string::npos ||
                                   named.name.find("k_proj.weight") != std::string::npos);
        if (!query_or_key) continue;
        Tensor weight = named.parameter.value();  // shares the parameter's storage
        for (int64_t i = 0; i < weight.numel(); ++i) weight.data()[i] *= query_key_gain;
    }
    io::CheckpointWriter writer(Json{{"config", parsed.resolved}, {"vocab_size", parsed.model.vocab_size}, {"step", 17}});
    models::add_parameters(writer, *model);
    std::ifstream tokenizer(env.tokenizer_path, std::ios::binary);
    writer.add_bytes("tokenizer.model", std::string(std::istreambuf_iterator<char>(tokenizer), {}));
    const std::string path = env.path(name);
    writer.write(path);
    return path;
}

std::vector<std::string> lines_of(const std::string& path) { return read_lines(path, "output"); }

// Runs the hnas executable to its end.
testing::Outcome run_hnas(const std::vector<std::string>& args) { return testing::run_hnas(args, AnalysisEnvironment::get().scratch); }

TEST(ExplainAway, DnasKeepsEveryKeyAboveTheLemmaBound) {
    const auto& env = AnalysisEnvironment::get();
    for (const std::string task : {"headline", "mlm"}) {
        const auto trained = tasks::load_trained_model(write_checkpoint(task + "_dnas.ckpt", model_json(task, "dnas"), 4.0f));
        EXPECT_EQ(trained.step, 17);
        const auto report = analysis::explain_away(trained, read_lines(env.articles, "articles"), {});
        EXPECT_EQ(report.sequences, 40);
        ASSERT_EQ(report.attentions.size(), 2u);  // encoder self-attention of each layer
        for (const auto& attention : report.attentions) {
            EXPECT_EQ(attention.kind, "dnas");
            EXPECT_EQ(attention.below_epsilon_in_every_head, 0);
            ASSERT_EQ(attention.heads.size(), 4u);
            for (const auto& head : attention.heads) {
                EXPECT_GT(head.keys, 400);
                EXPECT_GE(head.min_ratio, 1.0 - 1e-4) << task << " " << attention.name << ": Lemma 1 (paper 000)";
                EXPECT_EQ(head.below_epsilon, 0);
                int64_t counted = head.below_range + head.above_range;
                for (const int64_t count : head.histogram) counted += count;
                EXPECT_EQ(counted, head.keys);
                EXPECT_EQ(head.below_range, 0);  // every sum ≥ 1/L > e^-40
            }
        }
    }
}

TEST(ExplainAway, PeakedSoftmaxExplainsKeysAway) {
    const auto& env = AnalysisEnvironment::get();
    const auto trained = tasks::load_trained_model(write_checkpoint("lnas_peaked.ckpt", model_json("headline", "lnas"), 4.0f));
    const auto report = analysis::explain_away(trained, read_lines(env.articles, "articles"), {});
    int64_t below = 0;
    double smallest_ratio = 1e9;
    for (const auto& attention : report.attentions)
        for (const auto& head : attention.heads) {
            below += head.below_epsilon;
            smallest_ratio = std::min(smallest_ratio, head.min_ratio);
        }
    EXPECT_GT(below, 0) << "a sharpened softmax attention leaves some keys without weight";
    // The ln histogram keeps its tail: sums below e^-20 land in bins of their own (or below e^-40),
    // not clamped into one end bin.
    int64_t deep = 0;
    for (const auto& attention : report.attentions)
        for (const auto& head : attention.heads) {
            deep += head.below_range;
            for (size_t bin = 0; bin < 20; ++bin) deep += head.histogram[bin];
        }
    EXPECT_GT(deep, 0) << "no key weight sum below e^-20";
    EXPECT_LT(smallest_ratio, 1e-2);

    // Which keys they are: with room for every piece and position, the pieces (and the positions) account
    // for every explained-away key, each no more often than it occurs, the most frequent first.
    analysis::ExplainAwayOptions every_piece;
    every_piece.groups = 1000;
    const auto listed = analysis::explain_away(trained, read_lines(env.articles, "articles"), every_piece);
    const std::vector<std::string> texts = read_lines(env.articles, "articles");
    for (const auto& attention : listed.attentions) {
        // The keys below ε in every head are those in every head's list of explained-away places.
        std::set<std::pair<int64_t, int64_t>> in_every_head;
        for (const auto& place : attention.heads.front().explained_away) in_every_head.emplace(place.sequence, place.position);
        for (const auto& head : attention.heads) {
            std::set<std::pair<int64_t, int64_t>> in_this_head;
            for (const auto& place : head.explained_away) {
                if (in_every_head.count({place.sequence, place.position})) in_this_head.emplace(place.sequence, place.position);
            }
            in_every_head = std::move(in_this_head);
        }
        EXPECT_EQ(attention.below_epsilon_in_every_head, static_cast<int64_t>(in_every_head.size())) << attention.name;
        EXPECT_GT(attention.below_epsilon_in_every_head, 0) << "this sharpened softmax drops some keys in all four heads";
        for (const auto& head : attention.heads) {
            EXPECT_EQ(static_cast<int64_t>(head.explained_away.size()), head.below_epsilon);
            for (const auto& place : head.explained_away) {
                ASSERT_LT(place.sequence, static_cast<int64_t>(texts.size()));
                const auto row = analysis::encoder_input(trained.config, trained.tokenizer, texts[static_cast<size_t>(place.sequence)]);
                EXPECT_LT(place.position, static_cast<int64_t>(row.size()));
            }
            int64_t counted = 0;
            for (size_t i = 0; i < head.pieces_below_epsilon.size(); ++i) {
                const auto& piece = head.pieces_below_epsilon[i];
                EXPECT_GE(piece.occurrences, piece.below_epsilon) << piece.label;
                if (i > 0) {
                    EXPECT_LE(piece.below_epsilon, head.pieces_below_epsilon[i - 1].below_epsilon);
                }
                counted += piece.below_epsilon;
            }
            EXPECT_EQ(counted, head.below_epsilon) << attention.name;
            int64_t at_positions = 0;
            for (const auto& position : head.positions_below_epsilon) {
                EXPECT_GE(position.occurrences, position.below_epsilon) << "position " << position.label;
                at_positions += position.below_epsilon;
            }
            EXPECT_EQ(at_positions, head.below_epsilon) << attention.name;
        }
    }
    // By default at most 10 per head, and the JSON carries them.
    for (const auto& attention : report.attentions) {
        for (const auto& head : attention.heads) {
            EXPECT_LE(head.pieces_below_epsilon.size(), 10u);
            EXPECT_LE(head.positions_below_epsilon.size(), 10u);
        }
    }
    const Json json = analysis::to_json(listed);
    bool some = false;
    for (const Json& attention : json.at("attentions")) {
        for (const Json& head : attention.at("heads")) some = some || !head.at("pieces_below_epsilon").empty();
    }
    EXPECT_TRUE(some);
}

TEST(HybridWeights, FromCheckpointsAndRunLogs) {
    const auto trained = tasks::load_trained_model(write_checkpoint("hnas.ckpt", model_json("headline", "hnas")));
    const auto point = analysis::hybrid_weights_of_model(trained);
    ASSERT_EQ(point.attentions.size(), 2u);
    EXPECT_EQ(point.attentions[0].first, "encoder.layers.0.self_attn");
    for (const auto& [name, u] : point.attentions) {
        ASSERT_EQ(u.size(), 4u);
        for (const double value : u) EXPECT_NEAR(value, 0.2, 1e-6);  // hybrid_init
    }
    EXPECT_THROW(analysis::hybrid_weights_of_model(tasks::load_trained_model(
                     write_checkpoint("plain.ckpt", model_json("headline", "lnas")))),
                 Error);

    const fs::path run = AnalysisEnvironment::get().scratch.root / "run";
    fs::create_directories(run);
    std::ofstream(run / "metrics.jsonl") << R"({"step": 10, "loss": 3, "hybrid_u": {"encoder.layers.0.self_attn": [0.1, 0.2]}})" "\n"
                                         << R"({"step": 20, "validation_loss": 2.5})" "\n"
                                         << R"({"step": 20, "loss": 2, "hybrid_u": {"encoder.layers.0.self_attn": [0.3, 0.4]}})" "\n"
                                         << R"({"step": 10, "loss": 3, "hybrid_u": {"encoder.layers.0.self_attn": [0.15, 0.25]}})" "\n"
                                         << R"({"step": 30, "loss": 1, "hybr)";
    const auto points = analysis::hybrid_weights_of_run(run.string());
    ASSERT_EQ(points.size(), 2u);  // the partial last line of a killed run is skipped
    EXPECT_EQ(points[0].step, 10);
    EXPECT_EQ(points[0].attentions[0].second, (std::vector<double>{0.15, 0.25}));  // the resumed run's record
    EXPECT_EQ(points[1].attentions[0].second, (std::vector<double>{0.3, 0.4}));
}

// A run log's step must be a non-negative integer: get<int64_t>() would cast 1e300 unchecked and wrap
// 2^64 - 1 to -1.
TEST(HybridWeights, ARunLogStepThatIsNoIntegerIsRefused) {
    const testing::ScratchDir scratch("hnas_hybrid_step_");
    const std::string log_path = scratch.path("metrics.jsonl");
    const std::vector<std::pair<std::string, std::string>> steps = {
        {"1e300", "1e+300"}, {"18446744073709551615", "18446744073709551615"}, {"-1", "-1"}, {"\"10\"", "\"10\""}};
    for (const auto& [step, shown] : steps) {
        testing::write_file(log_path, R"({"step": )" + step + R"(, "loss": 1, "hybrid_u": {"a": [0.1]}})" "\n");
        EXPECT_CONTAINS(testing::error_of([&] { analysis::hybrid_weights_of_run(scratch.root.string()); }),
                        log_path + ":1: step must be an integer in [0, 9223372036854775807], got " + shown);
    }
}

TEST(Commands, DecodeEvalAndAnalyzeWriteTheirFiles) {
    const auto& env = AnalysisEnvironment::get();
    const std::string checkpoint = write_checkpoint("cli_hnas.ckpt", model_json("headline", "hnas"));
    const std::string headlines = env.path("headlines.txt"), nbest = env.path("nbest.txt");
    testing::Outcome run = run_hnas({"decode", "--checkpoint", checkpoint, "--input", env.articles, "--output", headlines,
                                     "--beam", "3", "--max-len", "6", "--batch", "7"});
    ASSERT_EQ(run.exit_code(), 0) << run.output;
    EXPECT_EQ(lines_of(headlines).size(), 40u);
    run = run_hnas({"decode", "--checkpoint", checkpoint, "--input", env.articles, "--output", nbest, "--beam", "3",
                    "--nbest", "2", "--max-len", "6"});
    ASSERT_EQ(run.exit_code(), 0) << run.output;
    const auto nbest_lines = lines_of(nbest);
    ASSERT_EQ(nbest_lines.size(), 80u);
    EXPECT_EQ(nbest_lines[0].rfind("0 ||| ", 0), 0u) << nbest_lines[0];
    EXPECT_EQ(nbest_lines[79].rfind("39 ||| ", 0), 0u) << nbest_lines[79];
    // The n-best's first hypothesis of each article is the 1-best output.
    const size_t text_start = nbest_lines[2].find(" ||| ") + 5;
    EXPECT_EQ(nbest_lines[2].substr(text_start, nbest_lines[2].rfind(" ||| ") - text_start), lines_of(headlines)[1]);

    const std::string report = env.path("report.json");
    run = run_hnas({"eval", "--checkpoint", checkpoint, "--articles", env.articles, "--references", env.titles, "--beam",
                    "2", "--max-len", "6", "--bootstrap", "50", "--report", report, "--hypotheses", headlines});
    ASSERT_EQ(run.exit_code(), 0) << run.output;
    EXPECT_CONTAINS(run.output, "rouge-l");
    const Json parsed = Json::parse(std::ifstream(report));
    EXPECT_EQ(parsed.at("step"), 17);
    EXPECT_EQ(parsed.at("rouge").at("pairs"), 40);
    EXPECT_EQ(parsed.at("attention").at("encoder").at("kind"), "hnas");
    EXPECT_TRUE(parsed.at("rouge_settings").at("stem").get<bool>());
    EXPECT_EQ(parsed.at("rouge").at("rouge-1").at("f1_ci95").size(), 2u);

    const std::string explain = env.path("explain.json");
    run = run_hnas({"analyze", "explain-away", "--checkpoint", checkpoint, "--input", env.articles, "--output", explain});
    ASSERT_EQ(run.exit_code(), 0) << run.output;
    const Json explained = Json::parse(std::ifstream(explain));
    EXPECT_EQ(explained.at("attentions").size(), 2u);
    EXPECT_TRUE(explained.at("attentions").at(0).at("heads").at(0).contains("pieces_below_epsilon"));
    run = run_hnas({"analyze", "hybrid"});
    EXPECT_EQ(run.exit_code(), 1);
    EXPECT_CONTAINS(run.output, "give --run DIR or --checkpoint FILE");
    const std::string hybrid = env.path("hybrid.json");
    run = run_hnas({"analyze", "hybrid", "--checkpoint", checkpoint, "--output", hybrid});
    ASSERT_EQ(run.exit_code(), 0) << run.output;
    EXPECT_EQ(Json::parse(std::ifstream(hybrid)).at("points").at(0).at("attentions").size(), 2u);
}

TEST(Commands, ErrorsNameTheProblem) {
    const auto& env = AnalysisEnvironment::get();
    const std::string unused = env.path("unused.txt");
    const std::string mlm = write_checkpoint("cli_mlm.ckpt", model_json("mlm", "lnas"));
    testing::Outcome run = run_hnas({"decode", "--checkpoint", mlm, "--input", env.articles, "--output", unused});
    EXPECT_EQ(run.exit_code(), 1);
    EXPECT_CONTAINS(run.output, " holds a mlm model (masked-LM pretraining");
    EXPECT_CONTAINS(run.output, "decoding needs a headline (encoder-decoder) checkpoint");
    const std::string headline = write_checkpoint("cli_lnas.ckpt", model_json("headline", "lnas"));
    run = run_hnas({"decode", "--checkpoint", headline, "--input", env.articles, "--output", unused, "--beam", "2", "--nbest", "3"});
    EXPECT_EQ(run.exit_code(), 1);
    EXPECT_CONTAINS(run.output, "--nbest must be in 1..beam");
    const std::string truncated = env.path("truncated.ckpt");
    fs::copy_file(headline, truncated, fs::copy_options::overwrite_existing);
    fs::resize_file(truncated, fs::file_size(truncated) / 2);
    run = run_hnas({"decode", "--checkpoint", truncated, "--input", env.articles, "--output", unused});
    EXPECT_EQ(run.exit_code(), 1);
    EXPECT_CONTAINS(run.output, truncated);
    run = run_hnas({"eval", "--checkpoint", headline, "--articles", env.articles, "--references", env.path("tokenizer.vocab"),
                    "--report", env.path("unused.json"), "--hypotheses", unused});
    EXPECT_EQ(run.exit_code(), 1);
    EXPECT_CONTAINS(run.output, "has 40 articles but");
}

}  // namespace
}  // namespace hnas
