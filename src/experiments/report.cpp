#include "experiments/report.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <filesystem>
#include <limits>
#include <map>
#include <optional>
#include <set>

#include "base/check.h"
#include "base/json.h"
#include "base/read_file.h"
#include "eval/statistics.h"
#include "experiments/compare.h"
#include "experiments/report_results.h"
#include "experiments/svg_chart.h"
#include "experiments/sweep.h"

namespace hnas::experiments {

namespace fs = std::filesystem;

namespace {

// One run's metrics.jsonl: the last record of each kind per step (a resumed run may log a step twice).
struct RunLog {
    std::string setting;
    std::string seed;
    std::string path;  // its metrics.jsonl, for errors
    std::map<int64_t, Json> progress, validation;
};

RunLog read_run_log(const fs::path& run, std::string setting, std::string seed) {
    const fs::path path = run / "metrics.jsonl";
    RunLog log{std::move(setting), std::move(seed), path.string(), {}, {}};
    if (!fs::exists(path)) return log;
    const std::vector<std::string> lines = read_lines(log.path, "metrics log");
    for (size_t i = 0; i < lines.size(); ++i) {
        if (!Json::accept(lines[i])) continue;  // a line being written
        // Depth-bounded: the records are copied, and copying recurses once per level.
        const std::string where = "report: metrics log " + log.path + ":" + std::to_string(i + 1) + ":";
        Json record = parse_json(lines[i], where);
        if (!record.contains("step")) continue;
        const int64_t step = json_integer(record.at("step"), 0, std::numeric_limits<int64_t>::max(), where + " step");
        // Chosen before the move: the assignment's right side is evaluated first.
        auto& records = record.contains("loss") ? log.progress : log.validation;
        records[step] = std::move(record);
    }
    return log;
}

// The runs of each path, in order.
std::vector<RunLog> find_run_logs(const std::vector<std::string>& paths) {
    std::vector<RunLog> runs;
    for (const std::string& path : paths) {
        for (const RunPath& run : find_runs(path, "metrics.jsonl", "report")) {
            runs.push_back(read_run_log(run.dir, run.setting, run.seed_folder));
        }
    }
    HNAS_CHECK(!runs.empty(), "report: no run (metrics.jsonl) in ", paths.front());
    return runs;
}

std::vector<std::string> settings_of(const std::vector<RunLog>& runs) {
    std::vector<std::string> settings;
    for (const RunLog& run : runs) {
        if (std::find(settings.begin(), settings.end(), run.setting) == settings.end()) settings.push_back(run.setting);
    }
    return settings;
}

double number_at(const Json& record, const std::string& key) {
    const auto it = record.find(key);
    return it != record.end() && it->is_number() ? it->get<double>() : std::nan("");
}

// A value of a record, NaN where it has none.
using ValueOf = std::function<double(const Json& record)>;
ValueOf key_value(const std::string& key) {
    return [key](const Json& record) { return number_at(record, key); };
}

// A chart of one value over the steps: per setting each seed thin, the mean over seeds (at steps every
// seed logged) thick.
Chart curves(const std::vector<RunLog>& runs, bool validation, const ValueOf& value_of, const std::string& title,
             const std::string& y_label) {
    Chart chart{title, "step", y_label, {}, validation, {}};
    const auto settings = settings_of(runs);
    for (size_t s = 0; s < settings.size(); ++s) {
        std::map<int64_t, std::vector<double>> by_step;
        size_t seeds = 0;
        for (const RunLog& run : runs) {
            if (run.setting != settings[s]) continue;
            const auto& records = validation ? run.validation : run.progress;
            if (records.empty()) continue;
            ++seeds;
            Series thin{"", series_color(s), 1.0, 0.3, {}};
            for (const auto& [step, record] : records) {
                const double value = value_of(record);
                thin.points.emplace_back(static_cast<double>(step), value);
                if (std::isfinite(value)) by_step[step].push_back(value);
            }
            chart.series.push_back(std::move(thin));
        }
        Series mean{settings[s], series_color(s), 2.5, 1.0, {}};
        for (const auto& [step, values] : by_step) {
            if (values.size() != seeds) continue;
            double sum = 0;
            for (const double v : values) sum += v;
            mean.points.emplace_back(static_cast<double>(step), sum / static_cast<double>(values.size()));
        }
        if (!mean.points.empty()) chart.series.push_back(std::move(mean));
    }
    return chart;
}

// The validation metrics the runs logged besides the loss ("validation_rouge_l", ...).
std::vector<std::string> validation_keys(const std::vector<RunLog>& runs) {
    std::vector<std::string> keys;
    for (const RunLog& run : runs) {
        for (const auto& [step, record] : run.validation) {
            for (const auto& [key, value] : record.items()) {
                if (key.starts_with("validation_") && key != "validation_loss" && key != "validation_perplexity" &&
                    std::find(keys.begin(), keys.end(), key) == keys.end()) {
                    keys.push_back(key);
                }
            }
        }
    }
    return keys;
}

// Hybrid weights: the last progress record's u per layer and head, averaged over a setting's seeds.
struct HybridWeights {
    std::vector<std::string> layers;
    std::map<std::string, std::vector<double>> heads;  // layer → mean u per head
};
HybridWeights final_hybrid_weights(const std::vector<RunLog>& runs, const std::string& setting) {
    HybridWeights out;
    std::map<std::string, std::vector<std::vector<double>>> seen;
    for (const RunLog& run : runs) {
        if (run.setting != setting || run.progress.empty()) continue;
        const Json& last = run.progress.rbegin()->second;
        if (!last.contains("hybrid_u")) continue;
        for (const auto& [layer, values] : last.at("hybrid_u").items()) {
            if (std::find(out.layers.begin(), out.layers.end(), layer) == out.layers.end()) out.layers.push_back(layer);
            seen[layer].push_back(values.get<std::vector<double>>());
        }
    }
    for (const auto& [layer, per_seed] : seen) {
        std::vector<double> mean(per_seed.front().size(), 0.0);
        for (const auto& values : per_seed) {
            for (size_t h = 0; h < mean.size() && h < values.size(); ++h) mean[h] += values[h] / static_cast<double>(per_seed.size());
        }
        out.heads[layer] = mean;
    }
    return out;
}

std::string hybrid_section(const std::vector<RunLog>& runs) {
    const auto settings = settings_of(runs);
    std::string html;
    Chart depth{"head-average u per layer (end of training)", "layer", "u", {}, true, {}};
    for (size_t s = 0; s < settings.size(); ++s) {
        const HybridWeights weights = final_hybrid_weights(runs, settings[s]);
        if (weights.layers.empty()) continue;
        Series series{settings[s], series_color(s), 2.0, 1.0, {}};
        std::string table = fmt::format("<table class=\"hybrid\"><caption>{}: u per layer and head, mean over seeds</caption>"
                                        "<tr><th>layer</th>", html_escape(settings[s]));
        const size_t heads = weights.heads.at(weights.layers.front()).size();
        for (size_t h = 0; h < heads; ++h) table += fmt::format("<th>head {}</th>", h);
        table += "<th>mean</th></tr>\n";
        for (size_t l = 0; l < weights.layers.size(); ++l) {
            const auto& values = weights.heads.at(weights.layers[l]);
            series.points.emplace_back(static_cast<double>(l), eval::mean_of(values));
            table += "<tr><td>" + html_escape(weights.layers[l]) + "</td>";
            for (const double u : values) table += fmt::format("<td>{:.3f}</td>", u);
            table += fmt::format("<td>{:.3f}</td></tr>\n", eval::mean_of(values));
        }
        if (depth.x_tick_labels.empty()) {
            for (size_t l = 0; l < weights.layers.size(); ++l) depth.x_tick_labels.push_back(std::to_string(l));
        }
        depth.series.push_back(std::move(series));
        html += table + "</table>\n";
    }
    if (depth.series.empty()) return "";
    return "<h2>Hybrid weights u</h2>\n<p>u weighs DNAS against LNAS in each hnas head (u·DNAS + (1−u)·LNAS); paper 004 "
           "Figs. 4–5 plot it per layer and head and its head average over depth.</p>\n" +
           svg_line_chart(depth) + html;
}

// object[key]; an hnas::Error "<where> has no "<key>"" when `object` is no object or lacks it.
const Json& member(const Json& object, const char* key, const std::string& where) {
    HNAS_CHECK(object.is_object() && object.contains(key), where, " has no \"", key, "\"");
    return object.at(key);
}

// Over every encoder head of a validation record's diagnostics: the smallest per-key weight sum (its
// ln), and the mean share of keys below ε.
double ln_smallest_key_sum(const Json& record) {
    if (!record.contains("diagnostics")) return std::nan("");
    double smallest = std::numeric_limits<double>::infinity();
    for (const auto& [name, attention] : record.at("diagnostics").at("attentions").items()) {
        for (const Json& value : attention.at("min_sum")) smallest = std::min(smallest, value.is_number() ? value.get<double>() : 0.0);
    }
    return std::log(smallest);
}
double share_below_epsilon(const Json& record) {
    if (!record.contains("diagnostics")) return std::nan("");
    double sum = 0;
    int64_t heads = 0;
    for (const auto& [name, attention] : record.at("diagnostics").at("attentions").items()) {
        for (const Json& value : attention.at("fraction_below_epsilon")) sum += value.get<double>(), ++heads;
    }
    return heads ? sum / static_cast<double>(heads) : std::nan("");
}

// Paper 004 Fig. 1: per setting, the share of keys per unit bin of ln Σ_i A_ij at the last validation,
// pooled over heads, layers and seeds; the keys below the range are the point left of it.
Chart key_sum_histogram(const std::vector<RunLog>& runs) {
    Chart chart{"explaining away: ln Σ_i A_ij at the last validation", "ln (sum of a key's attention weights)",
                "share of keys", {}, true, {}};
    const auto settings = settings_of(runs);
    for (size_t s = 0; s < settings.size(); ++s) {
        std::vector<double> counts;
        double below = 0, total = 0;
        int ln_low = 0;
        for (const RunLog& run : runs) {
            if (run.setting != settings[s] || run.validation.empty()) continue;
            const Json& last = run.validation.rbegin()->second;
            if (!last.contains("diagnostics")) continue;
            const std::string where = "report: metrics log " + run.path + ": last validation record: diagnostics";
            const Json& diagnostics = last.at("diagnostics");
            // ln of a positive double lies within ±745.
            ln_low = static_cast<int>(json_integer(member(diagnostics, "ln_low", where), -1000, 1000, where + ".ln_low"));
            for (const auto& [name, attention] : member(diagnostics, "attentions", where).items()) {
                const std::string of_attention = where + ".attentions." + name;
                for (const Json& head : member(attention, "ln_histogram", of_attention)) {
                    HNAS_CHECK(head.is_array(), of_attention, ".ln_histogram must hold an array of counts per head, got a ",
                               head.type_name());
                    counts.resize(head.size(), 0.0);
                    for (size_t bin = 0; bin < head.size(); ++bin) {
                        const double count = json_number(head[bin], of_attention + ".ln_histogram count");
                        counts[bin] += count, total += count;
                    }
                }
                for (const Json& value : member(attention, "below_range", of_attention)) {
                    const double count = json_number(value, of_attention + ".below_range count");
                    below += count, total += count;
                }
            }
        }
        if (total == 0) continue;
        Series series{settings[s], series_color(s), 2.0, 1.0, {{ln_low - 1.0, below / total}}};
        for (size_t bin = 0; bin < counts.size(); ++bin) series.points.emplace_back(ln_low + static_cast<double>(bin) + 0.5, counts[bin] / total);
        chart.series.push_back(std::move(series));
    }
    return chart;
}

// The head-averaged u of each hnas layer over training, one chart per setting that has any.
std::string hybrid_over_training(const std::vector<RunLog>& runs) {
    std::string html;
    for (const std::string& setting : settings_of(runs)) {
        std::vector<std::string> layers;
        for (const RunLog& run : runs) {
            if (run.setting != setting || run.progress.empty() || !run.progress.rbegin()->second.contains("hybrid_u")) continue;
            for (const auto& [layer, values] : run.progress.rbegin()->second.at("hybrid_u").items()) {
                if (std::find(layers.begin(), layers.end(), layer) == layers.end()) layers.push_back(layer);
            }
        }
        if (layers.empty()) continue;
        std::vector<RunLog> of_setting;
        for (const RunLog& run : runs) {
            if (run.setting == setting) of_setting.push_back(run);
        }
        Chart chart{setting + ": head-average u per layer over training", "step", "u", {}, false, {}};
        for (size_t l = 0; l < layers.size(); ++l) {
            const Chart layer_curves = curves(of_setting, false, [&](const Json& record) {
                if (!record.contains("hybrid_u") || !record.at("hybrid_u").contains(layers[l])) return std::nan("");
                return eval::mean_of(record.at("hybrid_u").at(layers[l]).get<std::vector<double>>());
            }, "", "");
            for (Series series : layer_curves.series) {
                series.color = series_color(l);
                if (!series.label.empty()) series.label = layers[l];
                chart.series.push_back(std::move(series));
            }
        }
        html += svg_line_chart(chart);
    }
    return html;
}

std::string diagnostics_section(const std::vector<RunLog>& runs) {
    const Chart smallest = curves(runs, true, ln_smallest_key_sum, "smallest per-key weight sum over training",
                                  "ln min_j Σ_i A_ij (over heads)");
    if (smallest.series.empty() || std::all_of(smallest.series.begin(), smallest.series.end(), [](const Series& series) {
            return std::none_of(series.points.begin(), series.points.end(), [](const auto& p) { return std::isfinite(p.second); });
        })) {
        return "";
    }
    return "<h2>Explaining away</h2>\n<p>Measured at each validation on a fixed batch of validation inputs, over every "
           "encoder self-attention head: paper 000 follows the smallest per-key weight sum over training (Fig. 1; "
           "Lemma 1 keeps it ≥ 1/L under DNAS), paper 004 plots the distribution of ln Σ_i A_ij (Fig. 1).</p>\n" +
           svg_line_chart(smallest) +
           svg_line_chart(curves(runs, true, share_below_epsilon, "share of keys below ε over training", "share of keys")) +
           svg_line_chart(key_sum_histogram(runs));
}

// The sweep records (sweep.json) of the paths that are sweeps.
std::vector<std::pair<std::string, Json>> sweep_records(const std::vector<std::string>& paths) {
    std::vector<std::pair<std::string, Json>> records;
    for (const std::string& path : paths) {
        const fs::path record = fs::path(path) / kSweepFile;
        if (fs::exists(record)) records.emplace_back(path, parse_json(read_file(record.string(), "sweep record"), "sweep record:"));
    }
    return records;
}

// A numeric key along which a sweep's settings vary with their other overrides fixed: its values, and
// per group of settings that share the other overrides, the setting at each value.
struct NumericAxis {
    std::string key;
    std::vector<double> values;  // sorted
    struct Group {
        std::string label;
        std::map<double, std::string> setting_at;
    };
    std::vector<Group> groups;
};

// The name components ("NAP", "kind=dnas") every one of `names` has, joined by commas.
std::string common_components(const std::vector<std::string>& names) {
    auto components = [](const std::string& name) {
        std::vector<std::string> out;
        for (size_t start = 0;;) {
            const size_t comma = name.find(',', start);
            out.push_back(name.substr(start, comma - start));
            if (comma == std::string::npos) return out;
            start = comma + 1;
        }
    };
    std::string label;
    for (const std::string& component : components(names.front())) {
        const bool everywhere = std::all_of(names.begin(), names.end(), [&](const std::string& name) {
            const auto others = components(name);
            return std::find(others.begin(), others.end(), component) != others.end();
        });
        if (everywhere) label += (label.empty() ? "" : ",") + component;
    }
    return label.empty() ? "all settings" : label;
}

// The keys every setting of `sweep` sets to a number, taking at least two values within each group of
// settings whose other overrides agree (a learning-rate grid, alone or crossed with a list).
std::vector<NumericAxis> numeric_axes(const Json& sweep) {
    const Json& settings = sweep.at("settings");
    std::vector<NumericAxis> axes;
    if (settings.size() < 2) return axes;
    for (const auto& [key, first_value] : settings.front().at("overrides").items()) {
        const bool numeric = std::all_of(settings.begin(), settings.end(), [&](const Json& setting) {
            const Json& overrides = setting.at("overrides");
            return overrides.contains(key) && overrides.at(key).is_number();
        });
        if (!numeric) continue;
        NumericAxis axis{key, {}, {}};
        std::map<std::string, size_t> group_of;  // the other overrides → group
        std::vector<std::vector<std::string>> names;
        for (const Json& setting : settings) {
            Json others = setting.at("overrides");
            const double value = others.at(key).get<double>();
            others.erase(key);
            const auto [at, inserted] = group_of.emplace(others.dump(), axis.groups.size());
            if (inserted) axis.groups.push_back({}), names.emplace_back();
            axis.groups[at->second].setting_at[value] = setting.at("name").get<std::string>();
            names[at->second].push_back(setting.at("name").get<std::string>());
            if (std::find(axis.values.begin(), axis.values.end(), value) == axis.values.end()) axis.values.push_back(value);
        }
        const bool varies = std::all_of(axis.groups.begin(), axis.groups.end(), [](const NumericAxis::Group& group) {
            return group.setting_at.size() >= 2;
        });
        if (!varies) continue;
        for (size_t g = 0; g < axis.groups.size(); ++g) axis.groups[g].label = common_components(names[g]);
        std::sort(axis.values.begin(), axis.values.end());
        axes.push_back(std::move(axis));
    }
    return axes;
}

// Per metric, its mean over seeds against each numeric axis of the sweeps, one thick line per group and
// its worst and best seed as thin ones: paper 002's Figs. 3, 5 and 7 give min, mean and max per
// learning rate, which says how robust each architecture is to the rate.
std::string axis_section(const std::vector<std::pair<std::string, Json>>& sweeps, const std::optional<Comparison>& comparison) {
    if (!comparison) return "";
    std::map<std::string, const Json*> summary_of;  // setting → its metrics
    std::vector<std::string> metrics;
    for (const Json& setting : comparison->json.at("settings")) {
        summary_of[setting.at("setting").get<std::string>()] = &setting.at("metrics");
        for (const auto& [metric, summary] : setting.at("metrics").items()) {
            if (std::find(metrics.begin(), metrics.end(), metric) == metrics.end()) metrics.push_back(metric);
        }
    }
    std::string html;
    for (const auto& [path, sweep] : sweeps) {
        for (const NumericAxis& axis : numeric_axes(sweep)) {
            html += fmt::format("<h2>Against {}</h2>\n<p>Sweep <code>{}</code>: per setting the mean over seeds at each value "
                                "(thick), the worst and the best seed (thin).</p>\n",
                                html_escape(axis.key), html_escape(path));
            for (const std::string& metric : metrics) {
                Chart chart{metric + " against " + axis.key, axis.key, metric, {}, true, {}};
                // A grid spanning a decade or more (learning rates: 1e-3, 3e-3, 1e-2) is spaced by its logarithm.
                if (axis.values.front() > 0 && std::log10(axis.values.back() / axis.values.front()) > 1 - 1e-9) {
                    chart.x_scale = XScale::log;
                }
                for (size_t g = 0; g < axis.groups.size(); ++g) {
                    Series mean{axis.groups[g].label, series_color(g), 2.5, 1.0, {}};
                    Series low{"", series_color(g), 1.0, 0.4, {}}, high = low;
                    for (const auto& [value, setting] : axis.groups[g].setting_at) {
                        const auto found = summary_of.find(setting);
                        if (found == summary_of.end() || !found->second->contains(metric)) continue;
                        const Json& summary = found->second->at(metric);
                        mean.points.emplace_back(value, summary.at("mean").get<double>());
                        low.points.emplace_back(value, summary.at("min").get<double>());
                        high.points.emplace_back(value, summary.at("max").get<double>());
                    }
                    if (mean.points.empty()) continue;
                    chart.series.push_back(std::move(low));
                    chart.series.push_back(std::move(high));
                    chart.series.push_back(std::move(mean));
                }
                if (!chart.series.empty()) html += svg_line_chart(chart);
            }
        }
    }
    return html;
}

// Escaped text with markdown's *emphasis* shown as emphasis (predictions are written in markdown for the docs).
std::string emphasized_html(const std::string& text) {
    const std::string escaped = html_escape(text);
    if (std::count(escaped.begin(), escaped.end(), '*') % 2 != 0) return escaped;
    std::string html;
    bool open = false;
    for (const char c : escaped) {
        if (c != '*') {
            html += c;
            continue;
        }
        html += open ? "</em>" : "<em>";
        open = !open;
    }
    return html;
}

// What the sweeps said they would show, stated before their runs (hnas sweep --prediction), with the
// commit of its file; a sweep that predates committed predictions holds the text alone.
std::string prediction_section(const std::vector<std::pair<std::string, Json>>& sweeps) {
    std::string html;
    for (const auto& [path, sweep] : sweeps) {
        const Json stated = sweep.value("prediction", Json());
        if (!stated.is_string()) continue;
        const Json file = sweep.value("prediction_file", Json()), commit = sweep.value("prediction_commit", Json());
        const std::string committed = file.is_string() && commit.is_string()
                                          ? fmt::format(" (<code>{}</code>, committed in <code>{}</code>)",
                                                        html_escape(file.get<std::string>()),
                                                        html_escape(commit.get<std::string>().substr(0, 7)))
                                          : "";
        html += fmt::format("<p class=\"prediction\"><b>Prediction</b>, stated before the runs of <code>{}</code>{}: {}</p>\n",
                            html_escape(path), committed, emphasized_html(stated.get<std::string>()));
    }
    return html;
}

// Folded: a reader opens them to check what ran, after the results.
std::string settings_section(const std::vector<std::pair<std::string, Json>>& sweeps, const std::vector<RunLog>& runs) {
    std::string html = "<h2>Settings</h2>\n";
    for (const auto& [path, sweep] : sweeps) {
        html += fmt::format("<details><summary>Sweep <code>{}</code>: base config <code>{}</code>{}, {} settings, seeds {}"
                            "</summary>\n",
                            html_escape(path), html_escape(sweep.at("config").get<std::string>()),
                            sweep.at("overrides").empty() ? "" : ", with --set " + html_escape(sweep.at("overrides").dump()),
                            sweep.at("settings").size(), html_escape(sweep.at("seeds").dump()));
        html += "<table class=\"settings\"><tr><th>setting</th><th>overrides</th></tr>\n";
        for (const Json& setting : sweep.at("settings")) {
            html += fmt::format("<tr><td>{}</td><td><code>{}</code></td></tr>\n", html_escape(setting.at("name").get<std::string>()),
                                html_escape(setting.at("overrides").dump()));
        }
        html += "</table></details>\n";
    }
    html += fmt::format("<details><summary>{} runs</summary><p>", runs.size());
    for (size_t i = 0; i < runs.size(); ++i) {
        if (i > 0) html.append(", ");
        html.append(html_escape(runs[i].setting));
        if (!runs[i].seed.empty()) html.append("/").append(html_escape(runs[i].seed));
        html.append(fmt::format(" ({} steps logged)", runs[i].progress.empty() ? 0 : runs[i].progress.rbegin()->first));
    }
    return html + ".</p></details>\n";
}

}  // namespace

std::string report_html(const std::vector<std::string>& paths) {
    const std::vector<RunLog> runs = find_run_logs(paths);
    std::string title = "hnas report: ";
    for (size_t i = 0; i < paths.size(); ++i) title.append(i > 0 ? ", " : "").append(paths[i]);
    std::string html = "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>" + html_escape(title) +
                       "</title>\n<style>body{font-family:sans-serif;max-width:1200px;margin:2em auto;color:#222}"
                       "table{border-collapse:collapse;margin:1em 0}td,th{border:1px solid #ccc;padding:4px 8px;"
                       "text-align:right}td:first-child,th:first-child{text-align:left}caption{text-align:left;"
                       "font-style:italic}svg.chart{display:block;margin:1em 0}.mean{white-space:nowrap}"
                       ".prediction{white-space:pre-line}</style></head>\n<body>\n<h1>" +
                       html_escape(title) + "</h1>\n";
    const auto sweeps = sweep_records(paths);
    const std::optional<Comparison> comparison = comparison_of(paths);
    html += prediction_section(sweeps);
    html += comparison_section(comparison);
    html += axis_section(sweeps, comparison);
    html += "<h2>Training</h2>\n<p>Each seed a thin line, the mean over seeds a thick one.</p>\n";
    html += svg_line_chart(curves(runs, false, key_value("loss"), "training loss", "loss"));
    html += svg_line_chart(curves(runs, true, key_value("validation_loss"), "validation loss", "loss"));
    for (const std::string& key : validation_keys(runs)) {
        html += svg_line_chart(
            curves(runs, true, key_value(key), key.substr(std::string("validation_").size()) + " on validation", key));
    }
    html += svg_line_chart(curves(runs, false, key_value("input_tokens_per_second"), "throughput", "input tokens/s"));
    html += hybrid_section(runs) + hybrid_over_training(runs);
    html += diagnostics_section(runs);
    html += settings_section(sweeps, runs);
    return html + "</body></html>\n";
}

}  // namespace hnas::experiments
