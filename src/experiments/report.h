// `hnas report`: one self-contained HTML file (inline SVG and CSS; no script, no network,
// no other file) showing a sweep or a run: the settings, the comparison table, each metric against a
// numeric key the sweep varies (paper 002 Fig. 3's learning rates), training and validation
// curves per setting (each seed a thin line, their mean a thick one), throughput, and the hybrid
// weights u per layer and head with their head-average per layer over depth (paper 004 Figs. 4-5).
#pragma once

#include <string>
#include <vector>

namespace hnas::experiments {

// The report of `paths` (a sweep's folder, run directories, or folders holding them).
std::string report_html(const std::vector<std::string>& paths);

}  // namespace hnas::experiments
