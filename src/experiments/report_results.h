// `hnas report`'s Results section (report.h lays out the page): the comparison's tables as HTML, per
// setting each metric over seeds, then the paired tests with their Holm-adjusted p-values.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "experiments/compare.h"

namespace hnas::experiments {

// The comparison of the paths' results; none before any run has a result.json.
std::optional<Comparison> comparison_of(const std::vector<std::string>& paths);

std::string comparison_section(const std::optional<Comparison>& comparison);

}  // namespace hnas::experiments
