// Line charts as inline SVG for the HTML report (report.h): no script, no external file.
#pragma once

#include <string>
#include <utility>
#include <vector>

namespace hnas::experiments {

struct Series {
    std::string label;   // in the legend; empty: not listed (e.g. a seed's thin line)
    std::string color;   // CSS colour
    double width = 1.0;  // stroke width in pixels
    double opacity = 1.0;
    std::vector<std::pair<double, double>> points;  // (x, y); non-finite y values are left out
};

// How x values map to the horizontal axis: linearly, or by their logarithm (a grid of learning rates
// spanning decades, whose points would bunch at the left of a linear axis).
enum class XScale { linear, log };

struct Chart {
    std::string title, x_label, y_label;
    std::vector<Series> series;
    bool markers = false;  // a dot at every point (few points: layers, validations)
    std::vector<std::string> x_tick_labels;  // non-empty: one label per integer x from 0 (categorical axis)
    XScale x_scale = XScale::linear;         // log: points with x <= 0 are left out
};

// An <svg> element of about 640 × 320 pixels; a chart without points says so in its place.
std::string svg_line_chart(const Chart& chart);

// The colour of the i-th setting (a fixed qualitative palette).
std::string series_color(size_t index);

// Text made safe for HTML element content and attribute values.
std::string html_escape(const std::string& text);

}  // namespace hnas::experiments
