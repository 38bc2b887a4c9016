// Parsing JSON text from outside (config files, --set values, checkpoint headers, run logs) with a
// bounded nesting depth and errors that name the source and the key path. nlohmann's parser itself
// is iterative, but copying, dumping and comparing a value recurse once per level, so a file nested
// 100,000 deep would overflow the stack long after it parsed.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <string_view>

namespace hnas {

using Json = nlohmann::ordered_json;

// Deeper than any config or checkpoint header hnas writes (they nest about six levels).
inline constexpr int kMaxJsonDepth = 100;

// Parses `text`; throws hnas::Error "<context> <problem> (at <key path>)" for syntax errors (with
// line and column), invalid UTF-8, numbers beyond a double's range and nesting deeper than
// kMaxJsonDepth. `context` starts the message, e.g. "config a.json: not valid JSON:".
Json parse_json(std::string_view text, const std::string& context);

}  // namespace hnas
