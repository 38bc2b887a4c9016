#include "experiments/grid.h"

#include <algorithm>
#include <set>

#include "base/check.h"
#include "base/read_file.h"

namespace hnas::experiments {

namespace {

// A key's shortest dotted suffix that no other key of the sweep ends with: "kind" for
// model.attention.encoder.kind unless model.attention.decoder.kind varies too ("encoder.kind").
std::string short_key(const std::string& key, const std::vector<std::string>& keys) {
    for (size_t dot = key.rfind('.'); dot != std::string::npos; dot = dot == 0 ? std::string::npos : key.rfind('.', dot - 1)) {
        const std::string suffix = key.substr(dot + 1);
        const bool unique = std::none_of(keys.begin(), keys.end(), [&](const std::string& other) {
            return other != key && (other == suffix || (other.size() > suffix.size() && other.ends_with("." + suffix)));
        });
        if (unique) return suffix;
    }
    return key;
}

// A value as it reads in a folder name: strings bare, everything else as JSON; characters a file name
// should not hold become '_'.
std::string value_text(const Json& value) {
    std::string text = value.is_string() ? value.get<std::string>() : value.dump();
    for (char& c : text) {
        const bool plain = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' ||
                           c == '-' || c == '+' || c == '_';
        if (!plain) c = '_';
    }
    return text;
}

// Names every setting from its overrides; throws when two settings would share a folder.
void name_settings(std::vector<Setting>& settings, const std::string& source) {
    std::vector<std::string> keys;
    for (const Setting& setting : settings) {
        for (const Override& o : setting.overrides) {
            if (std::find(keys.begin(), keys.end(), o.key) == keys.end()) keys.push_back(o.key);
        }
    }
    std::set<std::string> names;
    for (Setting& setting : settings) {
        if (!setting.name.empty()) {  // named by its list file
            HNAS_CHECK(names.insert(setting.name).second, source, ": two settings are both named ", setting.name);
            continue;
        }
        std::string name;
        for (const Override& o : setting.overrides) {
            if (!name.empty()) name.push_back(',');
            name.append(short_key(o.key, keys)).append("=").append(value_text(o.value));
        }
        setting.name = name.empty() ? "base" : name;
        HNAS_CHECK(names.insert(setting.name).second, source, ": two settings are both named ", setting.name,
                   "; each setting needs its own values");
    }
}

Json grid_value(const std::string& item, const std::string& argument) {
    std::string text = item;
    text.erase(0, text.find_first_not_of(" \t"));
    text.erase(text.find_last_not_of(" \t") + 1);
    HNAS_CHECK(!text.empty(), "--grid ", argument, ": an empty value in the list");
    return Json::accept(text) ? parse_json(text, "--grid " + argument + ":") : Json(text);
}

}  // namespace

std::vector<std::string> Setting::assignments() const {
    std::vector<std::string> out;
    for (const Override& o : overrides) out.push_back(o.key + "=" + o.value.dump());
    return out;
}

GridAxis parse_grid_axis(const std::string& argument) {
    const size_t equals = argument.find('=');
    HNAS_CHECK(equals != std::string::npos && equals > 0, "--grid ", argument, ": expected key.path=[value,…]");
    GridAxis axis{argument.substr(0, equals), {}};
    const std::string list = argument.substr(equals + 1);
    HNAS_CHECK(list.size() >= 2 && list.front() == '[' && list.back() == ']', "--grid ", argument,
               ": the values must be a bracketed list, e.g. ", axis.key, "=[1,2]");
    if (Json::accept(list)) {
        for (const Json& value : parse_json(list, "--grid " + argument + ":")) axis.values.push_back(value);
    } else {
        const std::string inner = list.substr(1, list.size() - 2);
        for (size_t start = 0;;) {
            const size_t comma = inner.find(',', start);
            axis.values.push_back(grid_value(inner.substr(start, comma - start), argument));
            if (comma == std::string::npos) break;
            start = comma + 1;
        }
    }
    HNAS_CHECK(!axis.values.empty(), "--grid ", argument, ": no values");
    return axis;
}

std::vector<Setting> expand_grid(const std::vector<GridAxis>& axes) {
    std::vector<Setting> settings(1);
    for (const GridAxis& axis : axes) {
        for (const Setting& setting : settings) {
            for (const Override& o : setting.overrides) {
                HNAS_CHECK(o.key != axis.key, "--grid ", axis.key, ": the key is given twice");
            }
        }
        std::vector<Setting> expanded;
        for (const Setting& setting : settings) {
            for (const Json& value : axis.values) {
                Setting next = setting;
                next.overrides.push_back({axis.key, value});
                expanded.push_back(std::move(next));
            }
        }
        settings = std::move(expanded);
    }
    name_settings(settings, "--grid");
    return settings;
}

std::vector<Setting> cross(const std::vector<Setting>& list, const std::vector<GridAxis>& axes) {
    if (axes.empty()) return list;
    const std::vector<Setting> grid = expand_grid(axes);
    std::vector<Setting> settings;
    for (const Setting& listed : list) {
        for (const Setting& combination : grid) {
            Setting setting = listed;
            for (const Override& o : combination.overrides) {
                for (const Override& given : listed.overrides) {
                    HNAS_CHECK(given.key != o.key, "--grid ", o.key, ": the list's setting ", listed.name, " sets it too");
                }
                setting.overrides.push_back(o);
            }
            setting.name = listed.name + "," + combination.name;
            settings.push_back(std::move(setting));
        }
    }
    name_settings(settings, "--list with --grid");
    return settings;
}

std::vector<Setting> read_setting_list(const std::string& path) {
    const Json list = parse_json(read_file(path, "setting list"), "setting list " + path + ": not valid JSON:");
    HNAS_CHECK(list.is_array() && !list.empty(), "setting list ", path,
               ": expected a non-empty JSON array of objects [{\"key\": value, …}, …], got ", list.type_name());
    std::vector<Setting> settings;
    for (size_t i = 0; i < list.size(); ++i) {
        HNAS_CHECK(list[i].is_object(), "setting list ", path, ": item ", i, " is a ", list[i].type_name(),
                   ", not an object of overrides");
        Setting setting;
        const Json* overrides = &list[i];
        if (list[i].contains("name") && list[i].contains("set")) {  // {"name": "NAP", "set": {overrides}}
            const Json& name = list[i].at("name");
            HNAS_CHECK(list[i].size() == 2 && name.is_string() && !name.get<std::string>().empty() &&
                           value_text(name) == name.get<std::string>() && list[i].at("set").is_object(),
                       "setting list ", path, ": item ", i, " must be {\"name\": a folder name of letters, digits, ",
                       "'.', '-', '+' and '_', \"set\": {overrides}}, got ", list[i].dump());
            setting.name = name.get<std::string>();
            overrides = &list[i].at("set");
        }
        for (const auto& [key, value] : overrides->items()) setting.overrides.push_back({key, value});
        settings.push_back(std::move(setting));
    }
    name_settings(settings, "setting list " + path);
    return settings;
}

}  // namespace hnas::experiments
