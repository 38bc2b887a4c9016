#include "experiments/report_results.h"

#include <fmt/format.h>

#include <algorithm>

#include "base/check.h"
#include "base/json.h"
#include "experiments/svg_chart.h"

namespace hnas::experiments {

namespace {

std::string number_cell(const Json& summary) {
    const double mean = summary.at("mean").get<double>();
    if (summary.at("n").get<int64_t>() == 1) return "<span class=\"mean\">" + number_text(mean) + "</span><br><small>one seed</small>";
    return fmt::format("<span class=\"mean\">{} ± {}</span><br><small>95 % CI ± {}; {} – {}</small>", number_text(mean),
                       number_text(summary.at("standard_error").get<double>(), mean),
                       number_text(summary.at("ci95").get<double>(), mean), number_text(summary.at("min").get<double>(), mean),
                       number_text(summary.at("max").get<double>(), mean));
}

std::string settings_table(const Json& settings) {
    std::vector<std::string> metrics;
    for (const Json& setting : settings) {
        for (const auto& [metric, summary] : setting.at("metrics").items()) {
            if (std::find(metrics.begin(), metrics.end(), metric) == metrics.end()) metrics.push_back(metric);
        }
    }
    std::string html = "<table class=\"results\"><caption>mean ± standard error over seeds (the 95 % confidence interval of the mean; min – max)"
                       "</caption>\n<tr><th>setting</th><th>seeds</th>";
    for (const std::string& metric : metrics) html += "<th>" + html_escape(metric) + "</th>";
    html += "</tr>\n";
    for (const Json& setting : settings) {
        html += fmt::format("<tr><td>{}</td><td>{}</td>", html_escape(setting.at("setting").get<std::string>()),
                            setting.at("seeds").size());
        for (const std::string& metric : metrics) {
            html += "<td>" + (setting.at("metrics").contains(metric) ? number_cell(setting.at("metrics").at(metric)) : "") + "</td>";
        }
        html += "</tr>\n";
    }
    return html + "</table>\n";
}

// A test's raw p and its Holm-adjusted p, as two cells (empty when the pair has no such test).
std::string p_cells(const Json& pair, const char* test) {
    if (!pair.contains(test)) return "<td></td><td></td>";
    const Json& holm = pair.at(test).at("p_holm");  // null outside a named family
    return fmt::format("<td>{:.4f}</td><td>{}</td>", pair.at(test).at("p_value").get<double>(),
                       holm.is_null() ? "–" : fmt::format("{:.4f}", holm.get<double>()));
}

// Folded: with many settings the pairs outnumber everything else on the page.
std::string pairs_table(const Json& comparison) {
    const Json& pairs = comparison.at("pairs");
    const int64_t bootstraps = comparison.at("families").at("bootstrap").get<int64_t>();
    std::string html = fmt::format(
        "<details><summary>{} paired differences a − b on shared seeds: Cohen's d_z, the permutation test over seeds, "
        "the bootstrap over test examples, each p beside its Holm adjustment</summary>\n<table class=\"pairs\">"
        "<caption>Holm's adjustment within each family: permutation tests over seeds ({}){}</caption>\n<tr><th>a</th>"
        "<th>b</th><th>metric</th><th>seeds</th><th>a − b</th><th>d_z</th><th>p (seeds)</th><th>p Holm (seeds)</th>"
        "<th>p (examples)</th><th>p Holm (examples)</th></tr>\n",
        pairs.size(), comparison.at("families").at("permutation").get<int64_t>(),
        bootstraps > 0 ? fmt::format(", bootstrap tests over examples ({})", bootstraps) : std::string());
    for (const Json& pair : pairs) {
        html += fmt::format("<tr><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{:.4g}</td><td>{:.2f}</td>{}{}</tr>\n",
                            html_escape(pair.at("a").get<std::string>()), html_escape(pair.at("b").get<std::string>()),
                            html_escape(pair.at("metric").get<std::string>()), pair.at("seeds").size(),
                            pair.at("mean_difference").get<double>(), pair.at("permutation").at("effect_size").get<double>(),
                            p_cells(pair, "permutation"), p_cells(pair, "bootstrap"));
    }
    return html + "</table></details>\n";
}

}  // namespace

std::optional<Comparison> comparison_of(const std::vector<std::string>& paths) {
    std::vector<TrialResult> results;
    try {
        results = collect_results(paths);
    } catch (const Error&) {
        return std::nullopt;
    }
    return compare(results);
}

std::string comparison_section(const std::optional<Comparison>& comparison) {
    if (!comparison) return "<h2>Results</h2>\n<p>No run has a result yet (<code>hnas test RUN_DIR</code> writes one).</p>\n";
    std::string html = "<h2>Results</h2>\n" + settings_table(comparison->json.at("settings"));
    if (comparison->json.at("pairs").empty()) return html;
    return html + pairs_table(comparison->json);
}

}  // namespace hnas::experiments
