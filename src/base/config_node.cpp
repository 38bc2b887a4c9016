#include "base/config_node.h"

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <sstream>

#include "base/check.h"
#include "base/number_format.h"
#include "base/read_file.h"
#include "base/text_io.h"

namespace hnas::config {

namespace {
std::string describe(const Json& value) {
    std::string text = value.dump();
    if (text.size() > 60) text = text.substr(0, 57) + "...";
    return text;
}

// A number as the table of keys shows it: 1e-05 as 1e-5, 0.001 as 1e-3, 65536 as 65536.
std::string format_number(double value) {
    if (value != 0.0 && std::fabs(value) < 1e-2) {
        const int exponent = static_cast<int>(std::floor(std::log10(std::fabs(value))));
        const double mantissa = value / std::pow(10.0, exponent);
        std::ostringstream text;
        text << portable(std::round(mantissa * 1e6) / 1e6) << "e" << exponent;
        return text.str();
    }
    std::ostringstream text;
    text << portable(value);
    return text.str();
}

std::string code(const std::string& text) { return "`" + text + "`"; }

// A default as the table shows it: strings and lists in code spans, numbers plain.
std::string format_fallback(const Json& value) {
    if (value.is_string()) return code(value.dump());
    if (value.is_number_float()) return format_number(value.get<double>());
    if (value.is_array() || value.is_object()) return code(value.dump());
    return value.dump();
}

std::string integer_range(int64_t min, int64_t max) {
    constexpr int64_t kLowest = std::numeric_limits<int64_t>::min(), kHighest = std::numeric_limits<int64_t>::max();
    if (min == kLowest && max == kHighest) return "integer";
    if (max == kHighest) return "integer ≥ " + std::to_string(min);
    return "integer in [" + std::to_string(min) + ", " + std::to_string(max) + "]";
}

std::string number_range(double min, double max) {
    if (std::isinf(min) && std::isinf(max)) return "number";
    if (std::isinf(max)) return "number ≥ " + format_number(min);
    return "number in [" + format_number(min) + ", " + format_number(max) + "]";
}

}  // namespace

ConfigNode::ConfigNode(const Json& value, std::string path, KeyLog* log) : value_(value), path_(std::move(path)), log_(log) {
    HNAS_CHECK(value_.is_object(), "config ", path_.empty() ? "file" : path_, ": expected an object {…}, got ",
               describe(value_));
}

void ConfigNode::fail(const std::string& key, const std::string& problem) const {
    throw Error("config " + path_of(key) + ": " + problem);
}

const Json* ConfigNode::find(const std::string& key) {
    read_.insert(key);
    const auto found = value_.find(key);
    return found == value_.end() ? nullptr : &*found;
}

bool ConfigNode::has(const std::string& key) const { return value_.contains(key); }

void ConfigNode::record(const std::string& key, std::string type, const Json& fallback, const Doc& doc) {
    if (!log_) return;
    log_->push_back({path_of(key), std::move(type), doc.default_text ? doc.default_text : format_fallback(fallback), doc.meaning});
}

Json ConfigNode::raw(const std::string& key, const std::string& type, const Json& fallback, const Doc& doc) {
    record(key, type, fallback, doc);
    const Json* value = find(key);
    return value ? *value : Json();
}

int64_t ConfigNode::integer(const std::string& key, int64_t fallback, const Doc& doc, int64_t min, int64_t max) {
    record(key, integer_range(min, max), fallback, doc);
    int64_t result = fallback;
    if (const Json* value = find(key)) {
        if (!value->is_number_integer()) fail(key, "expected an integer, got " + describe(*value));
        if (value->is_number_unsigned() && value->get<uint64_t>() > static_cast<uint64_t>(max)) {
            fail(key, "must be at most " + std::to_string(max) + ", got " + describe(*value));
        }
        result = value->get<int64_t>();
    }
    if (result < min || result > max) {
        std::ostringstream range;
        range << "must be ";
        if (max == std::numeric_limits<int64_t>::max()) {
            range << "at least " << min;
        } else {
            range << "between " << min << " and " << max;
        }
        fail(key, range.str() + ", got " + std::to_string(result));
    }
    resolved_[key] = result;
    return result;
}

double ConfigNode::number(const std::string& key, double fallback, const Doc& doc, double min, double max) {
    record(key, number_range(min, max), fallback, doc);
    double result = fallback;
    if (const Json* value = find(key)) {
        if (!value->is_number()) fail(key, "expected a number, got " + describe(*value));
        result = value->get<double>();
    }
    if (!(result >= min && result <= max)) {
        std::ostringstream message;
        message << "must be in [" << portable(min) << ", " << portable(max) << "], got " << portable(result);
        fail(key, message.str());
    }
    resolved_[key] = result;
    return result;
}

float ConfigNode::number(const std::string& key, float fallback, const Doc& doc, double min, double max) {
    // The shortest decimal that reads back as the float, as a double: 0.1f becomes 0.1.
    char digits[32];
    const auto written = std::to_chars(digits, digits + sizeof digits, fallback);
    const double shortest = std::strtod(std::string(digits, written.ptr).c_str(), nullptr);
    return static_cast<float>(number(key, shortest, doc, min, max));
}

bool ConfigNode::boolean(const std::string& key, bool fallback, const Doc& doc) {
    record(key, "bool", fallback, doc);
    bool result = fallback;
    if (const Json* value = find(key)) {
        if (!value->is_boolean()) fail(key, "expected true or false, got " + describe(*value));
        result = value->get<bool>();
    }
    resolved_[key] = result;
    return result;
}

std::string ConfigNode::read_string(const std::string& key, const std::string& fallback) {
    std::string result = fallback;
    if (const Json* value = find(key)) {
        if (!value->is_string()) fail(key, "expected a string, got " + describe(*value));
        result = value->get<std::string>();
    }
    resolved_[key] = result;
    return result;
}

std::string ConfigNode::text(const std::string& key, const std::string& fallback, const Doc& doc) {
    record(key, "string", fallback, doc);
    return read_string(key, fallback);
}

std::string ConfigNode::choice(const std::string& key, const std::string& fallback, const Doc& doc,
                               const std::vector<std::string>& allowed) {
    std::string type;
    for (const std::string& option : allowed) type += (type.empty() ? "" : " \\| ") + code("\"" + option + "\"");
    record(key, type, fallback, doc);
    const std::string result = read_string(key, fallback);
    for (const std::string& option : allowed) {
        if (option == result) return result;
    }
    std::string options;
    for (const std::string& option : allowed) options += (options.empty() ? "" : ", ") + ("\"" + option + "\"");
    fail(key, "expected one of " + options + ", got \"" + result + "\"");
}

std::vector<std::string> ConfigNode::text_or_list(const std::string& key, const std::vector<std::string>& fallback,
                                                  const Doc& doc) {
    record(key, "string or list of strings", fallback.size() == 1 ? Json(fallback[0]) : Json(fallback), doc);
    std::vector<std::string> result = fallback;
    if (const Json* value = find(key)) {
        if (value->is_string()) {
            result = {value->get<std::string>()};
        } else if (value->is_array() && !value->empty()) {
            result.clear();
            for (const Json& item : *value) {
                if (!item.is_string()) fail(key, "expected a string or a list of strings, got " + describe(*value));
                result.push_back(item.get<std::string>());
            }
        } else {
            fail(key, "expected a string or a non-empty list of strings, got " + describe(*value));
        }
    }
    resolved_[key] = result.size() == 1 ? Json(result[0]) : Json(result);
    return result;
}

ConfigNode ConfigNode::child(const std::string& key, const Doc& doc) {
    if (log_) log_->push_back({path_of(key), "object", "", doc.meaning});
    const Json* value = find(key);
    if (value && !value->is_object()) fail(key, "expected an object {…}, got " + describe(*value));
    return ConfigNode(value ? *value : Json::object(), path_of(key), log_);
}

void ConfigNode::finish_child(const std::string& key, const ConfigNode& child) {
    child.finish();
    resolved_[key] = child.resolved();
}

void ConfigNode::finish() const {
    for (const auto& [key, value] : value_.items()) {
        if (read_.count(key)) continue;
        std::string known;
        for (const std::string& name : read_) known += (known.empty() ? "" : ", ") + name;
        fail(key, "unknown option (known here: " + known + ")");
    }
}

namespace {

// True when `text` is a decimal number too large for a double ("1e999"): an error, not a string.
bool overflows_double(const std::string& text) {
    if (text.empty()) return false;
    char* end = nullptr;
    errno = 0;
    const double value = std::strtod(text.c_str(), &end);
    return end == text.c_str() + text.size() && errno == ERANGE && std::isinf(value);
}

}  // namespace

void apply_override(Json& config, const std::string& assignment) {
    HNAS_CHECK(config.is_object(), "--set ", assignment, ": the config is a JSON ", config.type_name(), ", not an object");
    const size_t equals = assignment.find('=');
    HNAS_CHECK(equals != std::string::npos && equals > 0, "--set ", assignment, ": expected key.path=value");
    const std::string path = assignment.substr(0, equals), text = assignment.substr(equals + 1);
    // Config strings must be UTF-8 like the files: JSON cannot hold anything else.
    const size_t bad_byte = find_invalid_utf8(assignment);
    HNAS_CHECK(bad_byte == std::string_view::npos, "--set ", bad_byte < equals ? "" : path, ": invalid UTF-8 at byte ",
               bad_byte + 1, " of the argument");
    HNAS_CHECK(!overflows_double(text), "--set ", path, ": the number ", text, " is beyond the range of a double");
    const Json value = Json::accept(text) ? parse_json(text, "--set " + path + ":") : Json(text);
    Json* node = &config;
    std::istringstream parts(path);
    std::string part;
    std::vector<std::string> keys;
    while (std::getline(parts, part, '.')) keys.push_back(part);
    HNAS_CHECK(keys.size() <= static_cast<size_t>(kMaxJsonDepth), "--set ", path.substr(0, 60),
               "...: key path deeper than ", kMaxJsonDepth, " levels");
    for (size_t i = 0; i + 1 < keys.size(); ++i) {
        HNAS_CHECK(!keys[i].empty(), "--set ", assignment, ": empty key in the path");
        Json& next = (*node)[keys[i]];
        if (next.is_null()) next = Json::object();
        HNAS_CHECK(next.is_object(), "--set ", assignment, ": ", keys[i], " is not an object in the config");
        node = &next;
    }
    HNAS_CHECK(!keys.empty() && !keys.back().empty(), "--set ", assignment, ": empty key");
    (*node)[keys.back()] = value;
}

Json read_json_file(const std::string& path) {
    return parse_json(read_file(path, "config"), "config " + path + ": not valid JSON:");
}

namespace {

namespace fs = std::filesystem;

// A chain of bases this long is surely a mistake (each file says what differs from one other).
constexpr size_t kMaxBaseChain = 16;

// The file's one name, for finding it twice in a chain; the path as given when it cannot be resolved.
std::string canonical_name(const std::string& path) {
    std::error_code error;
    const fs::path canonical = fs::weakly_canonical(path, error);
    return error ? path : canonical.string();
}

// `path` with its bases merged in; `chain` holds the files already on the way to it, to name a cycle.
Json read_config_chain(const std::string& path, std::vector<std::string>& chain) {
    Json raw = read_json_file(path);
    if (!raw.is_object() || !raw.contains("base")) return raw;
    const Json& base = raw.at("base");
    HNAS_CHECK(base.is_string() && !base.get_ref<const std::string&>().empty(), "config ", path,
               ": base must name the config file this one builds on, got ", base.dump());
    const std::string base_path = (fs::path(path).parent_path() / base.get<std::string>()).string();
    std::error_code error;
    HNAS_CHECK(fs::is_regular_file(base_path, error), "config ", path, ": its base ", base_path, " is not a file");
    const std::string canonical = canonical_name(base_path);
    std::string route;
    for (const std::string& file : chain) route += file + " → ";
    HNAS_CHECK(std::find(chain.begin(), chain.end(), canonical) == chain.end(), "config ", path,
               ": its base makes a cycle: ", route, canonical);
    HNAS_CHECK(chain.size() < kMaxBaseChain, "config ", path, ": more than ", kMaxBaseChain, " bases in a chain: ", route, canonical);
    chain.push_back(canonical);
    Json merged = read_config_chain(base_path, chain);
    HNAS_CHECK(merged.is_object(), "config ", base_path, ": expected an object {…} at the top level, got ", merged.type_name());
    raw.erase("base");
    merged.merge_patch(raw);
    return merged;
}

}  // namespace

Json read_config_file(const std::string& path) {
    std::vector<std::string> chain{canonical_name(path)};
    return read_config_chain(path, chain);
}

}  // namespace hnas::config
