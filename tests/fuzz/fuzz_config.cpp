// Fuzzes the experiment config as `hnas train --config F --set k=v ...` reads it: the input is the
// config file's text, then any number of --set arguments, each after a NUL byte (command-line
// arguments cannot hold NUL, so it is the one byte that needs no escaping). A config that loads must
// also re-parse from its resolved form, as decoding a checkpoint re-parses the stored config, to the
// same resolved form.
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "config/experiment_config.h"
#include "tasks/task.h"
#include "fuzz_support.h"

namespace {

using hnas::config::ExperimentConfig;

struct Invocation {
    std::string_view config_text;
    std::vector<std::string> overrides;
};

Invocation split_input(std::string_view input) {
    Invocation invocation;
    size_t end = input.find('\0');
    invocation.config_text = input.substr(0, end);
    while (end != std::string_view::npos) {
        const size_t start = end + 1;
        end = input.find('\0', start);
        invocation.overrides.emplace_back(input.substr(start, end == std::string_view::npos ? end : end - start));
    }
    return invocation;
}

// A rejection here is a finding too: a config that loaded must survive the round trip through a
// checkpoint.
void check_resolved_reparses(const ExperimentConfig& config) {
    std::optional<ExperimentConfig> again;
    hnas::fuzz::must_succeed("re-parsing the resolved config",
                             [&] { again = hnas::tasks::parse_config(config.resolved); });
    if (again->resolved != config.resolved) {
        std::fprintf(stderr, "finding: the resolved config re-parses differently:\n%s\nbecame\n%s\n",
                     config.resolved.dump(2).c_str(), again->resolved.dump(2).c_str());
        std::abort();
    }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    const Invocation invocation = split_input({reinterpret_cast<const char*>(data), size});
    const std::string path = hnas::fuzz::write_scratch_file("config.json", invocation.config_text);
    std::optional<ExperimentConfig> config;
    hnas::fuzz::reject_only_with_hnas_errors(
        [&] { config = hnas::tasks::load_config(path, invocation.overrides); });
    if (!config) return 0;
    (void)config->resolved.dump(2);  // what `hnas train` writes to config.json and `hnas inspect` prints
    check_resolved_reparses(*config);
    return 0;
}
