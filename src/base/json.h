// Parsing JSON text from outside (config files, --set values, checkpoint headers, run logs) with a
// bounded nesting depth and errors that name the source and the key path. nlohmann's parser itself
// is iterative, but copying, dumping and comparing a value recurse once per level, so a file nested
// 100,000 deep would overflow the stack long after it parsed.
#pragma once

#include <cstdint>
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

// A value read from a file as an integer in [low, high]; anything else (a float, a string, an unsigned
// beyond int64_t) throws hnas::Error "<what> must be an integer in [low, high], got <value>". nlohmann's
// get<int64_t>() would cast a float unchecked (undefined for 1e300) and wrap an unsigned above INT64_MAX.
int64_t json_integer(const Json& value, int64_t low, int64_t high, const std::string& what);

// A value read from a file as a number; anything else throws hnas::Error "<what> must be a number, got
// <value>" (get<double>() would throw nlohmann's type_error, which names neither the file nor the key).
double json_number(const Json& value, const std::string& what);

}  // namespace hnas
