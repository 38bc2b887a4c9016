// `hnas report`: the HTML page of a sweep holds its tables and charts and refers to no
// other file; rendered by headless Chromium (Debian's chromium; scripts/setup.sh installs it under CI),
// its DOM holds the expected tables and its screenshot is not blank.
#include <fmt/format.h>
#include <zlib.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <set>
#include <string>

#include "base/json.h"
#include "experiments/report.h"
#include "experiments/run_result.h"
#include "experiments/sweep.h"
#include "test_support.h"

namespace hnas::experiments {
namespace {

namespace fs = std::filesystem;

// A sweep of two settings × two seeds as its files lie on disk: sweep.json, each trial's metrics.jsonl
// (hnas in the encoder: its u per layer and head) and result.json.
void write_sweep(const fs::path& out) {
    const Json sweep = {{"config", "configs/gigaword_tiny.json"},
                        {"overrides", Json::array()},
                        {"settings",
                         {{{"name", "kind=lnas"}, {"overrides", {{"model.attention.encoder.kind", "lnas"}}}},
                          {{"name", "kind=hnas"}, {"overrides", {{"model.attention.encoder.kind", "hnas"}}}}}},
                        {"seeds", {1, 2}},
                        {"prediction", "*hnas ahead* of lnas by < 1 point"}};
    testing::write_file((out / kSweepFile).string(), sweep.dump());
    for (const char* setting : {"kind=lnas", "kind=hnas"}) {
        for (int seed = 1; seed <= 2; ++seed) {
            const fs::path run = out / setting / ("seed-" + std::to_string(seed));
            fs::create_directories(run);
            const bool hybrid = std::string(setting) == "kind=hnas";
            std::string log;
            for (int step = 10; step <= 100; step += 10) {
                Json hybrid_u = Json::object();
                if (hybrid) {
                    hybrid_u["encoder.layers.0.self_attention"] = {0.1 + 0.001 * step, 0.12, 0.09, 0.1};
                    hybrid_u["encoder.layers.1.self_attention"] = {0.2, 0.25 + 0.001 * step, 0.3, 0.1};
                }
                log += Json{{"step", step}, {"loss", 8.0 - 0.05 * step + 0.1 * seed}, {"input_tokens_per_second", 9000 + 50 * seed},
                            {"hybrid_u", hybrid_u}}.dump() + "\n";
                if (step % 50 == 0) {
                    // Two heads of one layer: hnas keeps every key above 1/L; lnas loses one below e^-40.
                    const Json attention = {{"kind", hybrid ? "hnas" : "lnas"},
                                            {"min_sum", {hybrid ? 0.05 : 1e-30, 0.2}},
                                            {"fraction_below_epsilon", {hybrid ? 0.0 : 0.25, 0.0}},
                                            {"ln_histogram", {std::vector<int>(45, 1), std::vector<int>(45, 2)}},
                                            {"below_range", {hybrid ? 0 : 5, 0}}};
                    const Json diagnostics = {{"sequences", 32}, {"epsilon", 1e-3}, {"ln_low", -40}, {"ln_high", 5},
                                              {"attentions", {{"encoder.layers.0.self_attention", attention}}}};
                    log += Json{{"step", step}, {"validation_loss", 6.0 - 0.01 * step}, {"validation_rouge_l", 0.1 + 0.001 * step},
                                {"diagnostics", diagnostics}}.dump() + "\n";
                }
            }
            testing::write_file((run / "metrics.jsonl").string(), log);
            const Json result = {{"seed", seed},
                                 {"metrics", {{"rouge_l", (hybrid ? 21.0 : 20.0) + seed}}},
                                 {"per_example", {{"rouge_l", {20.0 + seed, hybrid ? 24.0 : 21.0, 22.0}}}},
                                 {"training", {{"final_train_loss", 3.0}}}};
            testing::write_file((run / kResultFile).string(), result.dump());
        }
    }
}

TEST(Report, HoldsTablesAndChartsAndNoExternalReference) {
    const testing::ScratchDir scratch("hnas_report_");
    write_sweep(scratch.root);
    const std::string html = report_html({scratch.root.string()});
    EXPECT_CONTAINS(html, "<table class=\"results\">");
    // The page opens with the prediction, its markdown emphasis shown as such.
    EXPECT_CONTAINS(html, "<b>Prediction</b>, stated before the runs of");
    EXPECT_CONTAINS(html, "<em>hnas ahead</em> of lnas by &lt; 1 point</p>");
    EXPECT_CONTAINS(html, "<td>kind=hnas</td><td>2</td><td><span class=\"mean\">22.50 ± 0.50</span>");
    EXPECT_CONTAINS(html, "<table class=\"pairs\">");
    // Raw p beside Holm's: rouge_l's 0.5 is doubled in its family of two permutation tests (the training
    // loss's p is 1); its bootstrap test is a family of one.
    EXPECT_CONTAINS(html, "<caption>Holm's adjustment within each family: permutation tests over seeds (2), bootstrap "
                          "tests over examples (1)</caption>");
    EXPECT_CONTAINS(html, "<th>p (seeds)</th><th>p Holm (seeds)</th><th>p (examples)</th><th>p Holm (examples)</th>");
    EXPECT_CONTAINS(html, "<td>rouge_l</td><td>2</td><td>-1</td><td>0.00</td><td>0.5000</td><td>1.0000</td>");
    EXPECT_CONTAINS(html, "<td>final_train_loss</td><td>2</td><td>0</td><td>0.00</td><td>1.0000</td><td>1.0000</td><td></td><td></td></tr>");
    EXPECT_EQ(html.find("committed in"), std::string::npos) << "a prediction stated as text has no commit";
    EXPECT_EQ(html.find("<h2>Against"), std::string::npos) << "no numeric key varies in this sweep";
    EXPECT_CONTAINS(html, "head-average u per layer");
    EXPECT_CONTAINS(html, "<td>encoder.layers.1.self_attention</td><td>0.200</td><td>0.350</td>");
    EXPECT_CONTAINS(html, "rouge_l on validation");
    EXPECT_CONTAINS(html, "smallest per-key weight sum over training");
    EXPECT_CONTAINS(html, "explaining away: ln Σ_i A_ij at the last validation");
    EXPECT_CONTAINS(html, "kind=hnas: head-average u per layer over training");
    // Self-contained: no script, and nothing fetched (the one URL is SVG's namespace, which is never loaded).
    EXPECT_EQ(html.find("<script"), std::string::npos);
    for (const std::string attribute : {"src", "href"}) {
        for (size_t at = html.find(attribute); at != std::string::npos; at = html.find(attribute, at + 1)) {
            const size_t next = html.find_first_not_of(" \t\n", at + attribute.size());
            EXPECT_FALSE(next != std::string::npos && html[next] == '=') << "an attribute " << attribute << "= at byte " << at;
        }
    }
    EXPECT_CONTAINS(testing::error_of([&] { report_html({(scratch.root / "none").string()}); }), "is not a folder");

    // A prediction committed as a file shows its file and the commit's short hash.
    Json sweep = Json::parse(hnas::read_file((scratch.root / kSweepFile).string(), "sweep record"));
    sweep["prediction_file"] = "docs/experiments/predictions/tiny.md";
    sweep["prediction_commit"] = "0123456789abcdef0123456789abcdef01234567";
    testing::write_file((scratch.root / kSweepFile).string(), sweep.dump());
    EXPECT_CONTAINS(report_html({scratch.root.string()}),
                    "<code>" + scratch.root.string() + "</code> (<code>docs/experiments/predictions/tiny.md</code>, committed in "
                    "<code>0123456</code>): <em>hnas ahead</em> of lnas by &lt; 1 point</p>");

    // A setting with one seed shows its value and says so: it has no spread to show.
    fs::remove_all(scratch.root / "kind=hnas" / "seed-2");
    EXPECT_CONTAINS(report_html({scratch.root.string()}), "<td>kind=hnas</td><td>1</td><td><span class=\"mean\">22.00</span><br><small>one seed</small>");
}

// metrics.jsonl is read as untrusted input: lines that are no JSON (yet) are skipped, but a record nested
// deeper than hnas writes, a step or ln_low that is no integer and a histogram count that is no number
// are errors naming the log, never a stack overflow, undefined behaviour or a bare library exception.
TEST(Report, MetricsLogsAreReadAsUntrustedInput) {
    const testing::ScratchDir scratch("hnas_report_hostile_");
    write_sweep(scratch.root);
    const std::string log_path = (scratch.root / "kind=lnas" / "seed-1" / "metrics.jsonl").string();
    const std::string log_text = hnas::read_file(log_path, "metrics log");
    const std::string next_line = std::to_string(std::count(log_text.begin(), log_text.end(), '\n') + 1);
    const auto report_error = [&](const std::string& lines) {
        testing::write_file(log_path, log_text + lines);
        return testing::error_of([&] { report_html({scratch.root.string()}); });
    };
    constexpr const char* kNoError = "(no hnas::Error thrown)";
    // A record a kill cut short and a resumed run continued, then a partial last line.
    EXPECT_EQ(report_error(R"({"step": 101, "lo{"step": 102, "loss": 1.0})" "\n" R"({"step": 103, "lo)"), kNoError);
    const std::string deep = std::string(100000, '[') + std::string(100000, ']');
    const std::string deep_error = report_error(R"({"step": 101, "loss": 1.0, "deep": )" + deep + "}\n");
    EXPECT_CONTAINS(deep_error, "report: metrics log " + log_path + ":" + next_line + ": nesting deeper than 100 levels");
    const std::string step_error = "report: metrics log " + log_path + ":" + next_line +
                                   ": step must be an integer in [0, 9223372036854775807], got ";
    EXPECT_CONTAINS(report_error(R"({"step": 1e300, "loss": 1.0})" "\n"), step_error + "1e+300");
    EXPECT_CONTAINS(report_error(R"({"step": 18446744073709551615, "loss": 1.0})" "\n"), step_error + "18446744073709551615");
    EXPECT_CONTAINS(report_error(R"({"step": "7", "validation_loss": 1.0})" "\n"), step_error + "\"7\"");

    // The last validation's diagnostics make the histogram of ln Σ_i A_ij.
    const auto validation = [](const Json& ln_low, const Json& histogram) {
        const Json attention = {{"min_sum", Json::array({0.1})}, {"fraction_below_epsilon", Json::array({0.0})},
                                {"ln_histogram", histogram}, {"below_range", Json::array({0})}};
        const Json diagnostics = {{"ln_low", ln_low}, {"attentions", {{"a", attention}}}};
        return Json{{"step", 200}, {"validation_loss", 1.0}, {"diagnostics", diagnostics}}.dump() + "\n";
    };
    const Json counts = Json::array({Json::array({1, 2})});
    EXPECT_EQ(report_error(validation(-40, counts)), kNoError);
    const std::string where = "report: metrics log " + log_path + ": last validation record: diagnostics";
    EXPECT_CONTAINS(report_error(validation(1e300, counts)), where + ".ln_low must be an integer in [-1000, 1000], got 1e+300");
    EXPECT_CONTAINS(report_error(validation(-40, Json::array({Json::array({1, "2"})}))),
                    where + ".attentions.a.ln_histogram count must be a number, got \"2\"");
    EXPECT_CONTAINS(report_error(validation(-40, Json::array({1, 2}))),
                    where + ".attentions.a.ln_histogram must hold an array of counts per head, got a number");
}

// A learning-rate sweep over two named architectures (`--list` × `--grid`) as its files lie on disk.
void write_rate_sweep(const fs::path& out, const std::vector<double>& rates) {
    Json settings = Json::array();
    for (const std::string architecture : {"MTE", "NAP"}) {
        for (const double rate : rates) {
            const std::string name = architecture + ",learning_rate=" + fmt::format("{:g}", rate);
            settings.push_back({{"name", name},
                                {"overrides", {{"model.d_model", 32}, {"model.mixer", architecture}, {"train.learning_rate", rate}}}});
            for (int seed = 1; seed <= 2; ++seed) {
                const fs::path run = out / name / ("seed-" + std::to_string(seed));
                fs::create_directories(run);
                testing::write_file((run / "metrics.jsonl").string(), Json{{"step", 10}, {"loss", 1.0}}.dump() + "\n");
                const double accuracy = (architecture == "NAP" ? 90.0 : 50.0) + 1000 * rate + seed;
                testing::write_file((run / kResultFile).string(), Json{{"seed", seed}, {"metrics", {{"accuracy", accuracy}}}}.dump());
            }
        }
    }
    testing::write_file((out / kSweepFile).string(),
                        Json{{"config", "configs/paper002_cases.json"}, {"overrides", Json::array()}, {"settings", settings},
                             {"seeds", {1, 2}}}.dump());
}

// The x of a tick label in the chart that starts at `chart`.
double tick_x(const std::string& chart, const std::string& label) {
    const size_t text = chart.find("\">" + label + "</text>");
    EXPECT_NE(text, std::string::npos) << "no tick " << label;
    if (text == std::string::npos) return 0;
    const size_t x = chart.rfind("<text x=\"", text);
    return std::stod(chart.substr(x + 9));
}

// The report draws each metric against the rate, one line per architecture, and only for the key that
// varies within them.
TEST(Report, DrawsEachMetricAgainstANumericGridKey) {
    const testing::ScratchDir scratch("hnas_report_axis_");
    write_rate_sweep(scratch.root, {0.001, 0.0001, 0.01});  // not in order: the axis sorts them
    const std::string html = report_html({scratch.root.string()});
    EXPECT_CONTAINS(html, "<h2>Against train.learning_rate</h2>");
    EXPECT_EQ(html.find("<h2>Against model.d_model"), std::string::npos) << "d_model is the same in every setting";
    EXPECT_CONTAINS(html, "aria-label=\"accuracy against train.learning_rate\"");
    // Rates spanning two decades lie on a log axis: the ticks of 1e-4, 1e-3 and 1e-2 are evenly spaced,
    // the outer two at the plot's edges (the smallest and largest rate), with 2 and 5 of each decade between.
    const std::string chart = html.substr(html.find("aria-label=\"accuracy against train.learning_rate\""));
    EXPECT_NEAR(tick_x(chart, "1.0e-04"), 64.0, 0.1);
    EXPECT_NEAR(tick_x(chart, "0.001"), 344.0, 0.1);
    EXPECT_NEAR(tick_x(chart, "0.01"), 624.0, 0.1);
    EXPECT_NEAR(tick_x(chart, "0.002") - tick_x(chart, "0.001"), 280.0 * std::log10(2.0), 0.1);
    // The architectures (the names' shared part) in the legend.
    EXPECT_CONTAINS(html, ">MTE</text>");
    EXPECT_CONTAINS(html, ">NAP</text>");
}

// One decade exactly (the headline sweep's 1e-3, 3e-3, 1e-2) is a log axis too: 3e-3 sits at log10(3) of it.
TEST(Report, DrawsOneDecadeOfRatesOnALogAxis) {
    const testing::ScratchDir scratch("hnas_report_decade_");
    write_rate_sweep(scratch.root, {0.001, 0.003, 0.01});
    const std::string html = report_html({scratch.root.string()});
    const std::string chart = html.substr(html.find("aria-label=\"accuracy against train.learning_rate\""));
    const double decade = tick_x(chart, "0.01") - tick_x(chart, "0.001");
    EXPECT_GT(decade, 0.0);
    EXPECT_NEAR(tick_x(chart, "0.002") - tick_x(chart, "0.001"), decade * std::log10(2.0), 0.1);
}

// The pixels of an 8-bit RGB or RGBA PNG (non-interlaced), as Chromium's screenshots are.
struct Image {
    uint32_t width = 0, height = 0, channels = 0;
    std::vector<uint8_t> pixels;
};
Image decode_png(const std::string& bytes) {
    auto be32 = [&](size_t at) {
        return static_cast<uint32_t>(static_cast<uint8_t>(bytes[at])) << 24 | static_cast<uint32_t>(static_cast<uint8_t>(bytes[at + 1])) << 16 |
               static_cast<uint32_t>(static_cast<uint8_t>(bytes[at + 2])) << 8 | static_cast<uint8_t>(bytes[at + 3]);
    };
    Image image;
    std::string compressed;
    for (size_t at = 8; at + 8 <= bytes.size();) {
        const uint32_t length = be32(at);
        const std::string type = bytes.substr(at + 4, 4);
        if (type == "IHDR") {
            image.width = be32(at + 8);
            image.height = be32(at + 12);
            EXPECT_EQ(bytes[at + 16], 8) << "bit depth";
            EXPECT_EQ(bytes[at + 20], 0) << "interlaced";
            image.channels = bytes[at + 17] == 6 ? 4 : 3;
        } else if (type == "IDAT") {
            compressed += bytes.substr(at + 8, length);
        }
        at += 12 + length;
    }
    const size_t stride = image.width * image.channels;
    std::vector<uint8_t> raw((stride + 1) * image.height);
    uLongf raw_size = raw.size();
    EXPECT_EQ(uncompress(raw.data(), &raw_size, reinterpret_cast<const Bytef*>(compressed.data()), compressed.size()), Z_OK);
    image.pixels.assign(stride * image.height, 0);
    for (uint32_t y = 0; y < image.height; ++y) {
        const uint8_t filter = raw[y * (stride + 1)];
        const uint8_t* in = &raw[y * (stride + 1) + 1];
        uint8_t* row = &image.pixels[y * stride];
        const uint8_t* up = y > 0 ? &image.pixels[(y - 1) * stride] : nullptr;
        for (size_t x = 0; x < stride; ++x) {
            const int a = x >= image.channels ? row[x - image.channels] : 0, b = up ? up[x] : 0,
                      c = up && x >= image.channels ? up[x - image.channels] : 0;
            int predictor = 0;
            switch (filter) {
                case 1: predictor = a; break;
                case 2: predictor = b; break;
                case 3: predictor = (a + b) / 2; break;
                case 4: {
                    const int p = a + b - c, pa = std::abs(p - a), pb = std::abs(p - b), pc = std::abs(p - c);
                    predictor = pa <= pb && pa <= pc ? a : pb <= pc ? b : c;
                    break;
                }
            }
            row[x] = static_cast<uint8_t>(in[x] + predictor);
        }
    }
    return image;
}

TEST(Report, RendersInHeadlessChromium) {
    const char* chromium = "/usr/bin/chromium";
    if (!fs::exists(chromium)) GTEST_SKIP() << "no " << chromium << " (scripts/setup.sh installs it when CI is set)";
    const testing::ScratchDir scratch("hnas_report_chromium_");
    write_sweep(scratch.root);
    const std::string page = scratch.write("report.html", report_html({scratch.root.string()}));
    const std::vector<std::string> common{chromium, "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars",
                                          "--window-size=1000,1400"};
    std::vector<std::string> dump = common;
    dump.insert(dump.end(), {"--dump-dom", "file://" + page});
    const testing::Subprocess dom_process = testing::start_subprocess(dump, scratch.path("dom.html"));
    ASSERT_EQ(testing::finish(dom_process, 120), 0) << dom_process.output();
    const std::string dom = dom_process.output();
    EXPECT_CONTAINS(dom, "<table class=\"results\">");
    EXPECT_CONTAINS(dom, "<table class=\"pairs\">");
    EXPECT_CONTAINS(dom, "<svg class=\"chart\"");
    std::vector<std::string> shot = common;
    shot.insert(shot.end(), {"--screenshot=" + scratch.path("report.png"), "file://" + page});
    const testing::Subprocess shot_process = testing::start_subprocess(shot, scratch.path("shot.log"));
    ASSERT_EQ(testing::finish(shot_process, 120), 0) << shot_process.output();
    const Image image = decode_png(hnas::read_file(scratch.path("report.png"), "image"));
    ASSERT_EQ(image.width, 1000u);
    // Not blank: a good share of pixels differ from the background, in more than two colours.
    size_t painted = 0;
    std::set<uint32_t> colors;
    for (size_t i = 0; i + image.channels <= image.pixels.size(); i += image.channels) {
        const uint32_t rgb = image.pixels[i] << 16 | image.pixels[i + 1] << 8 | image.pixels[i + 2];
        painted += rgb != 0xffffff;
        if (colors.size() < 64) colors.insert(rgb);
    }
    EXPECT_GT(painted, image.pixels.size() / image.channels / 100) << "fewer than 1 % of the pixels are painted";
    EXPECT_GT(colors.size(), 8u);
}

}  // namespace
}  // namespace hnas::experiments
