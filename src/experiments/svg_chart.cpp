#include "experiments/svg_chart.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <limits>

namespace hnas::experiments {

namespace {

constexpr double kWidth = 640, kHeight = 320, kLeft = 64, kRight = 16, kTop = 28, kBottom = 44;

// About five round tick values covering [low, high].
std::vector<double> ticks(double low, double high) {
    const double span = high - low;
    const double raw = span / 5;
    const double magnitude = std::pow(10.0, std::floor(std::log10(raw)));
    double step = magnitude;
    for (const double factor : {1.0, 2.0, 2.5, 5.0, 10.0}) {
        step = factor * magnitude;
        if (span / step <= 6) break;
    }
    std::vector<double> out;
    for (double tick = std::ceil(low / step) * step; tick <= high + step * 1e-9; tick += step) out.push_back(tick);
    return out;
}

// Ticks of a log axis over [10^low, 10^high] (exponents): 1, 2 and 5 per decade, or only the powers of
// ten when the range spans more than three decades; returned as exponents.
std::vector<double> log_ticks(double low, double high) {
    const bool dense = high - low <= 3;
    std::vector<double> out;
    for (double decade = std::floor(low); decade <= std::ceil(high); ++decade) {
        for (const double mantissa : {1.0, 2.0, 5.0}) {
            if (mantissa > 1 && !dense) break;
            const double tick = decade + std::log10(mantissa);
            if (tick >= low - 1e-9 && tick <= high + 1e-9) out.push_back(tick);
        }
    }
    return out;
}

std::string tick_text(double value) {
    if (value != 0 && (std::fabs(value) >= 1e5 || std::fabs(value) < 1e-3)) return fmt::format("{:.1e}", value);
    return fmt::format("{:g}", std::fabs(value) < 1e-12 ? 0.0 : value);
}

}  // namespace

std::string html_escape(const std::string& text) {
    std::string out;
    for (const char c : text) {
        switch (c) {
            case '&': out += "&amp;"; break;
            case '<': out += "&lt;"; break;
            case '>': out += "&gt;"; break;
            case '"': out += "&quot;"; break;
            default: out.push_back(c);
        }
    }
    return out;
}

std::string series_color(size_t index) {
    static const char* const kPalette[] = {"#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd",
                                           "#8c564b", "#e377c2", "#17becf", "#7f7f7f", "#bcbd22"};
    return kPalette[index % std::size(kPalette)];
}

std::string svg_line_chart(const Chart& chart) {
    const bool log_x = chart.x_scale == XScale::log;
    // Where an x value lies along the axis: itself, or its exponent; NaN: not drawn.
    auto axis_x = [&](double x) { return !log_x ? x : x > 0 ? std::log10(x) : std::nan(""); };
    double x_low = std::numeric_limits<double>::infinity(), x_high = -x_low, y_low = x_low, y_high = -x_low;
    for (const Series& series : chart.series) {
        for (const auto& [raw_x, y] : series.points) {
            const double x = axis_x(raw_x);
            if (!std::isfinite(x) || !std::isfinite(y)) continue;
            x_low = std::min(x_low, x), x_high = std::max(x_high, x);
            y_low = std::min(y_low, y), y_high = std::max(y_high, y);
        }
    }
    std::string svg = fmt::format(
        "<svg class=\"chart\" xmlns=\"http://www.w3.org/2000/svg\" width=\"{}\" height=\"{}\" viewBox=\"0 0 {} {}\" "
        "role=\"img\" aria-label=\"{}\">\n<text x=\"{}\" y=\"18\" font-size=\"14\" font-weight=\"bold\">{}</text>\n",
        kWidth, kHeight, kWidth, kHeight, html_escape(chart.title), kLeft, html_escape(chart.title));
    if (!std::isfinite(x_low)) {
        return svg + fmt::format("<text x=\"{}\" y=\"{}\" font-size=\"12\">no data</text>\n</svg>\n", kLeft, kHeight / 2);
    }
    if (x_high == x_low) x_low -= 0.5, x_high += 0.5;
    if (y_high == y_low) y_low -= std::max(0.5, std::fabs(y_low) * 0.05), y_high += std::max(0.5, std::fabs(y_high) * 0.05);
    const double pad = (y_high - y_low) * 0.05;
    y_low -= pad, y_high += pad;
    const double plot_w = kWidth - kLeft - kRight, plot_h = kHeight - kTop - kBottom;
    auto sx = [&](double x) { return kLeft + (x - x_low) / (x_high - x_low) * plot_w; };
    auto sy = [&](double y) { return kTop + (y_high - y) / (y_high - y_low) * plot_h; };
    svg += fmt::format("<rect x=\"{}\" y=\"{}\" width=\"{}\" height=\"{}\" fill=\"none\" stroke=\"#999\"/>\n", kLeft, kTop,
                       plot_w, plot_h);
    for (const double tick : ticks(y_low, y_high)) {
        svg += fmt::format("<line x1=\"{0}\" x2=\"{1}\" y1=\"{2:.1f}\" y2=\"{2:.1f}\" stroke=\"#eee\"/>"
                           "<text x=\"{3}\" y=\"{4:.1f}\" font-size=\"11\" text-anchor=\"end\">{5}</text>\n",
                           kLeft, kLeft + plot_w, sy(tick), kLeft - 4, sy(tick) + 4, tick_text(tick));
    }
    if (chart.x_tick_labels.empty()) {
        for (const double tick : log_x ? log_ticks(x_low, x_high) : ticks(x_low, x_high)) {
            svg += fmt::format("<text x=\"{:.1f}\" y=\"{}\" font-size=\"11\" text-anchor=\"middle\">{}</text>\n", sx(tick),
                               kTop + plot_h + 14, tick_text(log_x ? std::pow(10.0, tick) : tick));
        }
    } else {
        for (size_t i = 0; i < chart.x_tick_labels.size(); ++i) {
            svg += fmt::format("<text x=\"{:.1f}\" y=\"{}\" font-size=\"10\" text-anchor=\"middle\">{}</text>\n",
                               sx(static_cast<double>(i)), kTop + plot_h + 14, html_escape(chart.x_tick_labels[i]));
        }
    }
    svg += fmt::format("<text x=\"{:.1f}\" y=\"{}\" font-size=\"12\" text-anchor=\"middle\">{}</text>\n", kLeft + plot_w / 2,
                       kHeight - 6, html_escape(chart.x_label));
    svg += fmt::format("<text transform=\"translate(14 {:.1f}) rotate(-90)\" font-size=\"12\" text-anchor=\"middle\">{}</text>\n",
                       kTop + plot_h / 2, html_escape(chart.y_label));
    double legend_y = kTop + 14;
    for (const Series& series : chart.series) {
        std::string path;
        for (const auto& [raw_x, y] : series.points) {
            const double x = axis_x(raw_x);
            if (!std::isfinite(x) || !std::isfinite(y)) continue;
            path += fmt::format("{}{:.1f},{:.1f}", path.empty() ? "M" : " L", sx(x), sy(y));
            if (chart.markers) {
                svg += fmt::format("<circle cx=\"{:.1f}\" cy=\"{:.1f}\" r=\"2.5\" fill=\"{}\" opacity=\"{}\"/>\n", sx(x), sy(y),
                                   series.color, series.opacity);
            }
        }
        svg += fmt::format("<path d=\"{}\" fill=\"none\" stroke=\"{}\" stroke-width=\"{}\" opacity=\"{}\"/>\n", path,
                           series.color, series.width, series.opacity);
        if (series.label.empty()) continue;
        svg += fmt::format("<line x1=\"{0}\" x2=\"{1}\" y1=\"{2:.1f}\" y2=\"{2:.1f}\" stroke=\"{3}\" stroke-width=\"3\"/>"
                           "<text x=\"{4}\" y=\"{5:.1f}\" font-size=\"11\">{6}</text>\n",
                           kLeft + plot_w - 150, kLeft + plot_w - 130, legend_y, series.color, kLeft + plot_w - 126,
                           legend_y + 4, html_escape(series.label));
        legend_y += 14;
    }
    return svg + "</svg>\n";
}

}  // namespace hnas::experiments
