// The tables of configs/README.md, made by parsing a config of every task with a KeyLog: each key's
// type, default and meaning come from the read in the parser, so the tables cannot drift from it.
#include <algorithm>
#include <map>
#include <sstream>

#include "base/check.h"
#include "config/experiment_config.h"

namespace hnas::config {

namespace {

// A config of each task as the parser sees it, with every optional part switched on so that its keys
// are read too (their defaults are recorded, not the values given here).
struct Variant {
    std::string task;   // as the tasks cell names it
    std::string label;  // as the type and default cells name it
    Json raw;
};

std::vector<Variant> variants(const TaskSchemas& tasks) {
    std::vector<Variant> list;
    for (const TaskSchema* task : tasks) {
        const std::vector<KeyTableVariant> configs =
            task->key_table_variants ? task->key_table_variants() : std::vector<KeyTableVariant>{{task->name, Json::object()}};
        for (const KeyTableVariant& variant : configs) {
            Json raw = variant.raw;
            raw["task"] = task->name;
            // Every attention stack the task's model has, with its prior switched on so that its keys are read.
            const Json stacks = parse_experiment_config(raw, tasks).resolved.at("model").at("attention");
            for (const auto& [stack, options] : stacks.items()) raw["model"]["attention"][stack]["prior"]["enabled"] = true;
            list.push_back({task->name, variant.label, raw});
        }
    }
    return list;
}

// model.attention.encoder.kind and its decoder and cross twins are one row: model.attention.<stack>.kind.
std::string row_path(const std::string& path) {
    const std::string prefix = "model.attention.";
    if (path.rfind(prefix, 0) != 0) return path;
    const size_t stack_end = path.find('.', prefix.size());
    return stack_end == std::string::npos ? path : prefix + "<stack>" + path.substr(stack_end);
}

// A variant's value in a table cell.
struct Cell {
    const Variant* variant;
    std::string value;
};

struct Row {
    std::string meaning;
    std::vector<Cell> types, defaults;
    std::vector<std::string> tasks;
};

// One cell from the variants' values: the value when they agree, else "labels: value; labels: value",
// a task's variants named by the task alone where they agree.
std::string merged(const std::vector<Cell>& cells) {
    struct Group {
        std::string value;
        std::vector<const Variant*> variants;
    };
    std::vector<Group> groups;
    for (const Cell& cell : cells) {
        auto same = std::find_if(groups.begin(), groups.end(), [&](const Group& g) { return g.value == cell.value; });
        if (same == groups.end()) same = groups.insert(groups.end(), Group{cell.value, {}});
        same->variants.push_back(cell.variant);
    }
    if (groups.size() == 1) return groups[0].value;
    std::string text;
    for (const Group& group : groups) {
        std::string labels;
        for (const Variant* variant : group.variants) {
            const bool task_whole = std::count_if(group.variants.begin(), group.variants.end(),
                                                  [&](const Variant* v) { return v->task == variant->task; }) > 1;
            const std::string label = task_whole ? variant->task : variant->label;
            if (labels.find(label) == std::string::npos) labels.append(labels.empty() ? "" : ", ").append(label);
        }
        text.append(text.empty() ? "" : "; ").append(labels).append(": ").append(group.value);
    }
    return text;
}

// A table cell: a '|' that is not escaped yet would end the cell.
std::string escaped(const std::string& text) {
    std::string cell;
    for (size_t i = 0; i < text.size(); ++i) {
        if (text[i] == '|' && (i == 0 || text[i - 1] != '\\')) cell.push_back('\\');
        cell.push_back(text[i]);
    }
    return cell;
}

}  // namespace

std::string key_tables(const TaskSchemas& tasks) {
    const std::vector<Variant> all = variants(tasks);
    std::vector<std::string> order;
    std::map<std::string, Row> rows;
    size_t task_count = 0;
    std::vector<std::string> seen_tasks;
    for (const Variant& variant : all) {
        if (std::find(seen_tasks.begin(), seen_tasks.end(), variant.task) == seen_tasks.end()) seen_tasks.push_back(variant.task);
        KeyLog log;
        parse_experiment_config(variant.raw, tasks, &log);
        std::vector<std::string> recorded;  // a stack's keys are read once per stack: keep the first
        for (const KeyRecord& key : log) {
            const std::string path = row_path(key.path);
            if (std::find(recorded.begin(), recorded.end(), path) != recorded.end()) continue;
            recorded.push_back(path);
            auto [row, added] = rows.try_emplace(path);
            if (added) order.push_back(path);
            row->second.meaning = key.meaning;
            row->second.types.push_back({&variant, key.type});
            row->second.defaults.push_back({&variant, key.fallback});
            if (std::find(row->second.tasks.begin(), row->second.tasks.end(), variant.task) == row->second.tasks.end()) {
                row->second.tasks.push_back(variant.task);
            }
        }
    }
    task_count = seen_tasks.size();

    // Sections in order of first appearance, each with its keys in reading order.
    std::vector<std::string> sections;
    std::map<std::string, std::vector<std::string>> keys_of;
    for (const std::string& path : order) {
        const size_t dot = path.rfind('.');
        const std::string parent = dot == std::string::npos ? "" : path.substr(0, dot);
        if (!keys_of.count(parent)) sections.push_back(parent);
        keys_of[parent].push_back(path);
    }
    std::ostringstream out;
    for (const std::string& section : sections) {
        out << (out.tellp() > 0 ? "\n" : "") << "### " << (section.empty() ? "Top level" : "`" + section + "`") << "\n\n"
            << "| key | type | default | tasks | meaning |\n| --- | --- | --- | --- | --- |\n";
        for (const std::string& path : keys_of[section]) {
            const Row& row = rows.at(path);
            std::string tasks;
            for (const std::string& task : row.tasks) tasks.append(tasks.empty() ? "" : ", ").append(task);
            out << "| `" << path.substr(section.empty() ? 0 : section.size() + 1) << "` | " << escaped(merged(row.types))
                << " | " << escaped(merged(row.defaults)) << " | " << (row.tasks.size() == task_count ? "all" : tasks) << " | "
                << escaped(row.meaning) << " |\n";
        }
    }
    return out.str();
}

std::string with_key_tables(const std::string& document, const std::string& path, const TaskSchemas& tasks) {
    const size_t begin = document.find(kKeyTablesBegin), end = document.find(kKeyTablesEnd);
    HNAS_CHECK(begin != std::string::npos && end != std::string::npos && begin < end, path,
               ": no key-table markers (the lines ", kKeyTablesBegin, " and ", kKeyTablesEnd, ")");
    const size_t tables_start = begin + std::string_view(kKeyTablesBegin).size();
    return document.substr(0, tables_start) + "\n\n" + key_tables(tasks) + "\n" + document.substr(end);
}

}  // namespace hnas::config
