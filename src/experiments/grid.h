// The settings of a sweep: the config overrides that tell its trials apart, from grids
// (`--grid key=[v1,v2]`; several grids multiply) or from a list file, each named so that the name is a
// folder name and says what differs ("kind=dnas,learning_rate=0.001").
#pragma once

#include <string>
#include <vector>

#include "base/json.h"

namespace hnas::experiments {

struct Override {
    std::string key;  // a dotted config path, as --set takes it
    Json value;
};

struct Setting {
    std::string name;
    std::vector<Override> overrides;
    // The overrides as --set arguments ("key=<JSON>").
    std::vector<std::string> assignments() const;
};

// One `--grid key=[v1,v2,…]`: the values are a JSON array, or a bracketed comma list whose items are
// JSON where they parse as JSON and strings otherwise ([lnas,dnas] is ["lnas","dnas"]).
struct GridAxis {
    std::string key;
    std::vector<Json> values;
};
GridAxis parse_grid_axis(const std::string& argument);

// Every combination of the axes' values, the first axis varying slowest; no axes: one setting, "base".
std::vector<Setting> expand_grid(const std::vector<GridAxis>& axes);
// Each setting of `list` (read_setting_list's) with each combination of the axes: "NAP" and
// learning_rate=[1e-3, 3e-3] give "NAP,learning_rate=0.001" and "NAP,learning_rate=0.003" (a learning-
// rate sweep over named architectures). A key may not be in both.
std::vector<Setting> cross(const std::vector<Setting>& list, const std::vector<GridAxis>& axes);

// `--list FILE`: a JSON array of objects, each the overrides of one setting ({"key": value, …}), named
// from them, or a named setting {"name": "NAP", "set": {"key": value, …}}.
std::vector<Setting> read_setting_list(const std::string& path);

}  // namespace hnas::experiments
