// Reading JSON configs strictly: every value is read through a ConfigNode, which checks its type
// and range and names the key path ("model.heads") in any error; finish() rejects keys nobody read,
// so a typo is an error rather than a silently ignored option. The node also records every value
// it returned, defaults included, as the fully resolved config that checkpoints store.
#pragma once

#include <cstdint>
#include <limits>
#include <set>
#include <string>
#include <vector>

#include "base/json.h"

namespace hnas::config {

using hnas::Json;

class ConfigNode {
public:
    // `value` must be an object; `path` names it in messages ("" for the root).
    ConfigNode(const Json& value, std::string path);

    int64_t integer(const std::string& key, int64_t fallback, int64_t min = std::numeric_limits<int64_t>::min(),
                    int64_t max = std::numeric_limits<int64_t>::max());
    double number(const std::string& key, double fallback, double min = -std::numeric_limits<double>::infinity(),
                  double max = std::numeric_limits<double>::infinity());
    bool boolean(const std::string& key, bool fallback);
    std::string text(const std::string& key, const std::string& fallback);
    std::string choice(const std::string& key, const std::string& fallback, const std::vector<std::string>& allowed);
    // A string, or a list of strings (e.g. one attention kind per layer).
    std::vector<std::string> text_or_list(const std::string& key, const std::string& fallback);
    bool has(const std::string& key) const;
    // The raw value of a key (marked as read), for lists of objects the caller reads with nodes of
    // its own; record what it resolved to with set_resolved.
    Json raw(const std::string& key);
    void set_resolved(const std::string& key, Json value) { resolved_[key] = std::move(value); }
    // A nested object (empty when absent); call finish() on it too.
    ConfigNode child(const std::string& key);

    // Throws for keys that were present but never read.
    void finish() const;
    // The values read (defaults included), in reading order; children are merged in by finish_child.
    const Json& resolved() const { return resolved_; }
    void finish_child(const std::string& key, const ConfigNode& child);

    // "model.heads" for key "heads" under "model".
    std::string path_of(const std::string& key) const { return path_.empty() ? key : path_ + "." + key; }
    [[noreturn]] void fail(const std::string& key, const std::string& problem) const;

private:
    const Json* find(const std::string& key);

    Json value_;
    std::string path_;
    std::set<std::string> read_;
    Json resolved_ = Json::object();
};

// Applies "a.b.c=value" overrides (command line --set) to a raw config before it is read. The value
// is parsed as JSON when it is valid JSON (numbers, true, [..]) and taken as a string otherwise; a
// number beyond a double's range and invalid UTF-8 are errors.
void apply_override(Json& config, const std::string& assignment);

// Reads a JSON file (depth-bounded, parse_json), naming the path, key path and position on error.
Json read_json_file(const std::string& path);

}  // namespace hnas::config
