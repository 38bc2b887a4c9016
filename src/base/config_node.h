// Reading JSON configs strictly: every value is read through a ConfigNode, which checks its type
// and range and names the key path ("model.heads") in any error; finish() rejects keys nobody read,
// so a typo is an error rather than a silently ignored option. The node also records every value
// it returned, defaults included, as the fully resolved config that checkpoints store.
//
// Each read names its default (the config struct's field: the one place a default is written) and
// says what the key means (the one place it is documented): a KeyLog given to the root node collects
// both, with the type and range, for the table of keys `hnas inspect --defaults` prints.
#pragma once

#include <cstdint>
#include <limits>
#include <set>
#include <string>
#include <vector>

#include "base/enum_names.h"
#include "base/json.h"

namespace hnas::config {

using hnas::Json;

// What a key means, for the table of keys. Where the default follows a rule rather than a value
// ("4 · d_model"), `default_text` says so in the table instead of the value it had there.
struct Doc {
    const char* meaning;
    const char* default_text = nullptr;
    Doc(const char* meaning_, const char* default_text_ = nullptr) : meaning(meaning_), default_text(default_text_) {}
};

// One key as read, for the table of keys.
struct KeyRecord {
    std::string path;     // "model.heads"
    std::string type;     // "integer ≥ 1", "`\"post\"` \\| `\"pre\"`" (markdown)
    std::string fallback; // the default, as the table shows it (markdown)
    std::string meaning;
};
using KeyLog = std::vector<KeyRecord>;

class ConfigNode {
public:
    // `value` must be an object; `path` names it in messages ("" for the root). Keys read through this
    // node and its children are appended to `log` when it is given.
    ConfigNode(const Json& value, std::string path, KeyLog* log = nullptr);

    int64_t integer(const std::string& key, int64_t fallback, const Doc& doc, int64_t min = std::numeric_limits<int64_t>::min(),
                    int64_t max = std::numeric_limits<int64_t>::max());
    double number(const std::string& key, double fallback, const Doc& doc, double min = -std::numeric_limits<double>::infinity(),
                  double max = std::numeric_limits<double>::infinity());
    // A float setting: its default is taken at float precision (0.1f is 0.1, not 0.10000000149).
    float number(const std::string& key, float fallback, const Doc& doc, double min = -std::numeric_limits<double>::infinity(),
                 double max = std::numeric_limits<double>::infinity());
    bool boolean(const std::string& key, bool fallback, const Doc& doc);
    std::string text(const std::string& key, const std::string& fallback, const Doc& doc);
    // One of an enum's names (its table in base/enum_names.h).
    template <class E>
    E choice(const std::string& key, E fallback, const Doc& doc) {
        return parse_enum<E>(choice(key, name_of(fallback), doc, name_list<E>()), path_of(key));
    }
    // One of `allowed` (for a choice whose set depends on other settings).
    std::string choice(const std::string& key, const std::string& fallback, const Doc& doc, const std::vector<std::string>& allowed);
    // A string, or a list of strings (e.g. one attention kind per layer).
    std::vector<std::string> text_or_list(const std::string& key, const std::vector<std::string>& fallback, const Doc& doc);
    bool has(const std::string& key) const;
    // The raw value of a key (marked as read), for lists of objects the caller reads with nodes of its
    // own; `type` and `fallback` describe it for the table. Record what it resolved to with set_resolved.
    Json raw(const std::string& key, const std::string& type, const Json& fallback, const Doc& doc);
    void set_resolved(const std::string& key, Json value) { resolved_[key] = std::move(value); }
    // A nested object (empty when absent); call finish_child with it when done.
    ConfigNode child(const std::string& key, const Doc& doc);

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
    std::string read_string(const std::string& key, const std::string& fallback);
    void record(const std::string& key, std::string type, const Json& fallback, const Doc& doc);

    Json value_;
    std::string path_;
    KeyLog* log_;
    std::set<std::string> read_;
    Json resolved_ = Json::object();
};

// Applies "a.b.c=value" overrides (command line --set) to a raw config before it is read. The value
// is parsed as JSON when it is valid JSON (numbers, true, [..]) and taken as a string otherwise; a
// number beyond a double's range and invalid UTF-8 are errors.
void apply_override(Json& config, const std::string& assignment);

// Reads a JSON file (depth-bounded, parse_json), naming the path, key path and position on error.
Json read_json_file(const std::string& path);
// Reads a config file, merging in the file it builds on: a top-level "base" names another config
// (relative to this file's folder, itself possibly with a base), and this file's keys replace the
// base's object by object (JSON merge patch, RFC 7396: a null removes the base's key).
Json read_config_file(const std::string& path);

}  // namespace hnas::config
