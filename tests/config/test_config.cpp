// Configs: errors name the key and the expected form, sizes have upper bounds, overrides and defaults
// resolve, every shipped config parses to itself, `base` configs merge, configs/README.md's key tables
// are the parser's, hostile JSON ends in an error naming file and key, and saved configs upgrade.
#include <filesystem>
#include <sstream>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "config/experiment_config.h"
#include "models/memory_estimate.h"
#include "tasks/task.h"
#include "test_support.h"
#include "tiny_config.h"

namespace hnas {
namespace {

using config::Json;
using testing::tiny_config;

std::string config_error(const Json& raw) {
    try {
        tasks::parse_config(raw);
    } catch (const Error& e) {
        return e.what();
    }
    return "";
}

TEST(Config, UnknownKeysAreErrorsNamingThePath) {
    Json raw = tiny_config("headline");
    raw["model"]["haeds"] = 4;
    const std::string error = config_error(raw);
    EXPECT_CONTAINS(error, "config model.haeds: unknown option");
    EXPECT_CONTAINS(error, "heads");  // the known options are listed
    raw = tiny_config("headline");
    raw["model"]["attention"]["encoder"]["prior"] = {{"bukets", 8}};
    EXPECT_CONTAINS(config_error(raw), "config model.attention.encoder.prior.bukets: unknown option");
}

TEST(Config, WrongTypesNameTheExpectedForm) {
    Json raw = tiny_config("headline");
    raw["model"]["heads"] = "four";
    EXPECT_CONTAINS(config_error(raw), "config model.heads: expected an integer, got \"four\"");
    raw = tiny_config("headline");
    raw["model"]["dropout"] = 0.1;
    EXPECT_CONTAINS(config_error(raw), "config model.dropout: expected an object");
    raw = tiny_config("headline");
    raw["model"]["attention"]["encoder"]["kind"] = 3;
    EXPECT_CONTAINS(config_error(raw), "config model.attention.encoder.kind: expected a string or a non-empty list");
}

TEST(Config, ImpossibleValuesAreErrors) {
    Json raw = tiny_config("headline");
    raw["model"]["heads"] = 5;
    EXPECT_CONTAINS(config_error(raw), "config model.heads: 5 heads do not divide d_model = 32");
    raw = tiny_config("headline");
    raw["model"]["dropout"]["residual"] = 1.5;
    EXPECT_CONTAINS(config_error(raw), "config model.dropout.residual: must be in [0, 0.99], got 1.5");
    raw = tiny_config("headline");
    raw["model"]["activation"] = "swish";
    EXPECT_CONTAINS(config_error(raw), "config model.activation: expected one of \"relu\", \"gelu\", got \"swish\"");
    raw = tiny_config("headline");
    raw["model"]["attention"]["encoder"]["kind"] = Json::array({"lnas", "dnas", "hnas"});
    EXPECT_CONTAINS(config_error(raw), "lists 3 kinds for 2 layers");
    raw = tiny_config("headline");
    raw["model"]["attention"]["encoder"]["kind"] = "softmax";
    EXPECT_CONTAINS(config_error(raw), "unknown attention kind 'softmax'; known kinds: lnas, dnas");
}

// Sizes have upper bounds, so no product of them (parameters, batches, the memory estimate) can wrap.
TEST(Config, SizesHaveUpperBounds) {
    Json raw = tiny_config("headline");
    raw["model"]["d_model"] = int64_t{1} << 40;
    EXPECT_CONTAINS(config_error(raw), "config model.d_model: must be between 1 and 1048576, got 1099511627776");
    raw = tiny_config("headline");
    raw["model"]["encoder_layers"] = 5000;
    EXPECT_CONTAINS(config_error(raw), "config model.encoder_layers: must be between 1 and 1024, got 5000");
    raw = tiny_config("headline");
    raw["data"]["batch_tokens"] = uint64_t{1} << 63;
    EXPECT_CONTAINS(config_error(raw), "config data.batch_tokens: must be at most 1073741824");
}

TEST(Config, SharedEncoderDecoderNeedsMatchingAttendingStacks) {
    Json raw = tiny_config("headline");
    raw["model"]["share_encoder_decoder"] = true;
    raw["model"]["decoder_layers"] = 3;
    EXPECT_CONTAINS(config_error(raw), "config model.share_encoder_decoder: needs as many decoder layers as encoder layers, got 3 and 2");
    raw["model"]["decoder_layers"] = 2;
    raw["model"]["mixer"] = "sum";
    EXPECT_CONTAINS(config_error(raw), "config model.mixer: is sum, but share_encoder_decoder needs the encoder's attention projections");
    raw = tiny_config("mlm");
    raw["model"]["share_encoder_decoder"] = true;
    EXPECT_CONTAINS(config_error(raw), "config model.share_encoder_decoder: unknown option");
}

TEST(Config, QueryNormalizingKindsAreRejectedInTheDecoder) {
    for (const char* stack : {"decoder", "cross"}) {
        Json raw = tiny_config("headline");
        raw["model"]["attention"][stack] = {{"kind", "dnas"}};
        const std::string error = config_error(raw);
        EXPECT_CONTAINS(error, std::string("config model.attention.") + stack + ".kind");
        EXPECT_CONTAINS(error, "dnas_causal");
    }
    Json raw = tiny_config("headline");
    raw["model"]["attention"]["decoder"] = {{"kind", "dnas_causal"}};
    raw["model"]["attention"]["cross"] = {{"kind", "dnas_causal"}};
    EXPECT_EQ(config_error(raw), "");
}

TEST(Config, OverridesAndResolvedDefaults) {
    Json raw = tiny_config("headline");
    config::apply_override(raw, "model.encoder_layers=1");
    config::apply_override(raw, "model.attention.encoder.kind=dnas");
    config::apply_override(raw, "model.norm=pre");
    const config::ExperimentConfig parsed = tasks::parse_config(raw);
    EXPECT_EQ(parsed.model.encoder_layers, 1);
    EXPECT_EQ(parsed.model.encoder_attention.kinds, std::vector<std::string>{"dnas"});
    EXPECT_EQ(parsed.model.norm, nn::NormPlacement::pre);
    // Defaults are written into the resolved config, which checkpoints keep.
    EXPECT_EQ(parsed.resolved.at("model").at("positions"), "learned");
    EXPECT_EQ(parsed.resolved.at("model").at("attention").at("cross").at("kind"), "lnas");
    EXPECT_THROW(config::apply_override(raw, "novalue"), Error);
}

TEST(Config, MatmulPrecisionIsF32OrBf16) {
    Json raw = tiny_config("headline");
    config::ExperimentConfig parsed = tasks::parse_config(raw);
    EXPECT_EQ(parsed.train.precision, backend::MatmulPrecision::f32);
    EXPECT_EQ(parsed.resolved.at("train").at("precision"), "f32");
    raw["train"]["precision"] = "bf16";
    parsed = tasks::parse_config(raw);
    EXPECT_EQ(parsed.train.precision, backend::MatmulPrecision::bf16);
    EXPECT_EQ(parsed.resolved.at("train").at("precision"), "bf16");
    raw["train"]["precision"] = "fp16";
    EXPECT_CONTAINS(config_error(raw), "config train.precision: expected one of \"f32\", \"bf16\", got \"fp16\"");
    raw["train"]["precision"] = 16;
    EXPECT_CONTAINS(config_error(raw), "config train.precision: expected a string");
}

// Checkpoints store the resolved config and decoding re-parses it, so the resolved form must parse to
// itself.
TEST(Config, EveryShippedConfigParsesAndItsResolvedFormParsesToItself) {
    int parsed = 0;
    for (const auto& entry : std::filesystem::directory_iterator(std::string(HNAS_SOURCE_DIR) + "/configs")) {
        if (entry.path().extension() != ".json") continue;
        SCOPED_TRACE(entry.path().string());
        config::ExperimentConfig config;
        ASSERT_NO_THROW(config = tasks::load_config(entry.path().string()));
        config::ExperimentConfig again;
        ASSERT_NO_THROW(again = tasks::parse_config(config.resolved));
        EXPECT_EQ(again.resolved, config.resolved);
        ++parsed;
    }
    EXPECT_GT(parsed, 0);
}

// The paper configs' parameter counts as docs/papers.md gives them (departures 7 and 8), from the
// estimate that Models.MemoryEstimateCountsTheParametersOfTheBuiltModel holds to the built model (the
// per-head scalars aside), without building 222M parameters here.
TEST(Config, PaperConfigsHaveTheirDocumentedSizes) {
    const std::string configs = std::string(HNAS_SOURCE_DIR) + "/configs/";
    const std::vector<std::pair<std::string, int64_t>> sizes = {{"gigaword_paper.json", 108661392},
                                                                {"gigaword_paper_dnas.json", 108661248},
                                                                {"mlm_paper.json", 110106572},
                                                                {"mlm_paper_lnas.json", 110106428}};
    for (const auto& [file, documented] : sizes) {
        const config::ExperimentConfig parsed = tasks::load_config(configs + file, {});
        const models::ModelConfig& m = parsed.model;
        // hnas in the encoder has one u per head and layer, which the estimate leaves out
        const int64_t hnas_scalars = m.encoder_attention.kinds.front() == "hnas" ? m.heads * m.encoder_layers : 0;
        EXPECT_EQ(models::estimate_training_memory(m, {1, 16, 16, 16}).parameters + hnas_scalars, documented) << file;
    }
}

// A config that names a `base` is that file with its own keys merged over it, object by object; a null
// removes the base's key. The paper twins differ from their bases in the encoder's kind alone.
TEST(Config, BaseConfigsMergeObjectByObject) {
    const testing::ScratchDir scratch("hnas_base_");
    std::filesystem::create_directories(scratch.path("sub"));
    Json base = tiny_config("headline");
    base["train"] = {{"learning_rate", 0.003}, {"steps", 40}};
    scratch.write("base.json", base.dump());
    scratch.write("sub/twin.json", R"({"base": "../base.json", "model": {"heads": 2, "attention": {"encoder": {"kind": "dnas", "hybrid_init": null}}},
                                       "train": {"steps": 7}})");
    const config::ExperimentConfig from_base = tasks::load_config(scratch.path("base.json"));
    const config::ExperimentConfig twin = tasks::load_config(scratch.path("sub/twin.json"), {"train.steps=9"});
    EXPECT_EQ(twin.model.heads, 2);
    EXPECT_EQ(twin.model.width, 32);  // the base's, beside a key the twin replaced
    EXPECT_EQ(twin.model.encoder_attention.kinds, (std::vector<std::string>{"dnas", "dnas"}));
    // null removed the base's hybrid_init: the twin has the default
    const auto hybrid_init = [](const config::ExperimentConfig& c) { return c.resolved.at("model").at("attention").at("encoder").at("hybrid_init"); };
    EXPECT_EQ(hybrid_init(twin), hybrid_init(tasks::parse_config(Json::object())));
    EXPECT_NE(hybrid_init(from_base), hybrid_init(twin));
    EXPECT_EQ(twin.train.schedule.learning_rate, 0.003);
    EXPECT_EQ(twin.train.steps, 9);  // --set applies last
    EXPECT_FALSE(twin.resolved.contains("base"));

    scratch.write("loop_a.json", R"({"base": "loop_b.json"})");
    scratch.write("loop_b.json", R"({"base": "loop_a.json"})");
    EXPECT_CONTAINS(testing::error_of([&] { tasks::load_config(scratch.path("loop_a.json")); }),
                    "its base makes a cycle: ");
    scratch.write("self.json", R"({"base": "self.json"})");
    EXPECT_CONTAINS(testing::error_of([&] { tasks::load_config(scratch.path("self.json")); }), "makes a cycle");
    scratch.write("missing.json", R"({"base": "nowhere.json"})");
    EXPECT_CONTAINS(testing::error_of([&] { tasks::load_config(scratch.path("missing.json")); }),
                    "config " + scratch.path("missing.json") + ": its base " + scratch.path("nowhere.json") + " is not a file");
    scratch.write("number.json", R"({"base": 3})");
    EXPECT_CONTAINS(testing::error_of([&] { tasks::load_config(scratch.path("number.json")); }),
                    "base must name the config file this one builds on, got 3");
    scratch.write("array.json", "[1]");
    scratch.write("on_array.json", R"({"base": "array.json"})");
    EXPECT_CONTAINS(testing::error_of([&] { tasks::load_config(scratch.path("on_array.json")); }),
                    "array.json: expected an object {…} at the top level, got array");

    const std::string configs = std::string(HNAS_SOURCE_DIR) + "/configs/";
    for (const auto& [twin_file, base_file, kind] : std::vector<std::tuple<std::string, std::string, std::string>>{
             {"gigaword_paper_dnas.json", "gigaword_paper.json", "dnas"}, {"mlm_paper_lnas.json", "mlm_paper.json", "lnas"}}) {
        Json expected = tasks::load_config(configs + base_file, {"model.attention.encoder.kind=" + kind}).resolved;
        Json have = tasks::load_config(configs + twin_file).resolved;
        for (Json* resolved : {&expected, &have}) resolved->at("model").at("attention").at("encoder").erase("hybrid_init");
        EXPECT_EQ(have, expected) << twin_file;
    }
}

// configs/README.md holds the key tables `hnas inspect --defaults` prints, which come from the parser:
// a default, range or description changed in the code and not in the file fails here.
TEST(Config, ReadmeKeyTablesAreTheParsers) {
    const std::string path = std::string(HNAS_SOURCE_DIR) + "/configs/README.md";
    const std::string document = hnas::read_file(path, "configs README");
    const std::string expected = tasks::with_key_tables(document, path);
    std::istringstream have(document), want(expected);
    std::string have_line, want_line;
    for (int line = 1; std::getline(want, want_line); ++line) {
        const bool more = static_cast<bool>(std::getline(have, have_line));
        ASSERT_TRUE(more && have_line == want_line)
            << path << " line " << line << " is\n  " << (more ? have_line : "(end of file)") << "\nbut the parser gives\n  "
            << want_line << "\n(regenerate: build/hnas inspect --defaults --into configs/README.md)";
    }
    EXPECT_FALSE(std::getline(have, have_line)) << path << " has more lines than the parser's tables give";
}

// Hostile config files and --set values end in an hnas::Error naming the file (or --set) and the key
// path, never in a crash or a bare library exception.
TEST(Config, HostileJsonIsAnErrorNamingTheFileAndTheKey) {
    const testing::ScratchDir scratch("hnas_hostile_");
    const std::string path = scratch.path("config.json");
    auto load_error = [&](const std::string& text, const std::vector<std::string>& overrides = {}) {
        testing::write_file(path, text);
        return testing::error_of([&] { tasks::load_config(path, overrides); });
    };
    const std::string deep_array = std::string(100000, '[') + std::string(100000, ']');
    EXPECT_CONTAINS(load_error("{\"model\": " + deep_array + "}"), "config " + path + ": not valid JSON: nesting deeper than 100 levels (at model[0][0][0][0][0]...[0][0][0])");
    std::string deep_object;
    for (int i = 0; i < 100000; ++i) deep_object += "{\"a\": ";
    deep_object += "1" + std::string(100000, '}');
    EXPECT_CONTAINS(load_error(deep_object), "nesting deeper than 100 levels (at a.a.a.a.a.a...a.a.a)");
    EXPECT_CONTAINS(load_error(R"({"train": {"learning_rate": 1e999}})"), "config " + path + ": not valid JSON: number overflow");
    EXPECT_CONTAINS(load_error(R"({"train": {"learning_rate": 1e999}})"), "(at train.learning_rate)");
    EXPECT_CONTAINS(load_error("{\"data\": {\"train_titles\": \"x\xff.txt\"}}"), "ill-formed UTF-8");
    EXPECT_CONTAINS(load_error("{\"data\": {\"train_titles\": \"x\xff.txt\"}}"), "(at data.train_titles)");
    EXPECT_CONTAINS(load_error(R"({"data": {"train_sources": [{"path": "a"}, {"path": 1e400}]}})"),
                    "(at data.train_sources[1].path)");
    EXPECT_CONTAINS(load_error(R"({"seed": 18446744073709551615})"), "config seed: must be at most");
    const std::string good = R"({"task": "headline"})";
    EXPECT_CONTAINS(load_error(good, {"train.learning_rate=1e999"}), "--set train.learning_rate: the number 1e999 is beyond the range of a double");
    EXPECT_CONTAINS(load_error(good, {"data.train_titles=x\xff.txt"}), "--set data.train_titles: invalid UTF-8 at byte 20");
    EXPECT_CONTAINS(load_error(good, {"data.train\xff=x"}), "--set : invalid UTF-8 at byte 11");
    EXPECT_CONTAINS(load_error(good, {"model.encoder_layers=" + deep_array}), "--set model.encoder_layers: nesting deeper than 100 levels");
    std::string deep_key = "a";
    for (int i = 0; i < 100000; ++i) deep_key += ".a";
    EXPECT_CONTAINS(load_error(good, {deep_key + "=1"}), "key path deeper than 100 levels");
    // A top level that is not an object, with and without overrides (found by fuzz_config).
    for (const char* top : {"1", "\"x\"", "[1]", "null"}) {
        EXPECT_CONTAINS(load_error(top, {"a=1"}), "config " + path + ": expected an object {…} at the top level, got ");
        EXPECT_CONTAINS(load_error(top), "config " + path + ": expected an object {…} at the top level, got ");
    }
    // Not JSON at all: a plain string value, which the strict reader then rejects by type.
    EXPECT_CONTAINS(load_error(good, {"train.learning_rate=fast"}), "config train.learning_rate: expected a number, got \"fast\"");
    std::filesystem::remove(path);
}

// A config saved before `alpha` replaced ot_alpha still loads, as it computed.
TEST(PreferencePriors, SavedConfigsWithOtAlphaLoadAsTheyComputed) {
    const auto saved = [](const Json& kind, double ot_alpha) {
        return Json{{"task", "headline"}, {"model", {{"attention", {{"encoder", {{"kind", kind}, {"ot_alpha", ot_alpha}}}}}}}};
    };
    const config::ExperimentConfig plain = tasks::parse_config(config::upgrade_saved_config(saved("lnas", 1.0)));
    EXPECT_EQ(plain.model.encoder_attention.alpha, 1.0f);
    const config::ExperimentConfig ot =
        tasks::parse_config(config::upgrade_saved_config(saved(Json::array({"ot", "ot", "ot", "ot", "ot", "ot"}), 0.7)));
    EXPECT_FLOAT_EQ(ot.model.encoder_attention.alpha, 0.7f);
    EXPECT_CONTAINS(testing::error_of([&] { config::upgrade_saved_config(saved(Json::array({"lnas", "ot"}), 0.7)); }),
                    "config model.attention.encoder.ot_alpha: 0.7 was saved by an earlier hnas");
    EXPECT_CONTAINS(testing::error_of([&] { tasks::parse_config(saved("lnas", 1.0)); }),
                    "config model.attention.encoder.ot_alpha: unknown option");
}

}  // namespace
}  // namespace hnas
