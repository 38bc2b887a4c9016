// Colour in the log: the level names of spdlog's lines ("[info]", "[error]") are coloured only where a
// person reads them. Header-only: hnas-bench uses it too.
#pragma once

#include <CLI/CLI.hpp>
#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>
#include <unistd.h>

#include <cstdlib>
#include <memory>
#include <string>

#include "command_line/validators.h"

namespace hnas::command_line {

enum class LogColor { automatic, always, never };
inline constexpr EnumName<LogColor> kLogColorNames[]{
    {LogColor::automatic, "auto"}, {LogColor::always, "always"}, {LogColor::never, "never"}};
constexpr const auto& enum_names(LogColor) { return kLogColorNames; }

// auto: colour when standard output is a terminal, NO_COLOR (https://no-color.org) is unset or empty,
// and the process is not a rank under mpirun (whose output reaches the user through mpirun: a rank
// sees a pseudo-terminal even when mpirun's own output goes to a file).
inline bool wants_color(LogColor mode) {
    if (mode != LogColor::automatic) return mode == LogColor::always;
    const char* no_color = std::getenv("NO_COLOR");
    const bool under_mpirun = std::getenv("OMPI_COMM_WORLD_SIZE") != nullptr || std::getenv("PMI_SIZE") != nullptr;
    return isatty(STDOUT_FILENO) && (no_color == nullptr || *no_color == '\0') && !under_mpirun;
}

// The default logger, writing to standard output, with colour as `mode` decides.
inline void use_log_color(LogColor mode) {
    auto sink = std::make_shared<spdlog::sinks::stdout_color_sink_mt>(wants_color(mode) ? spdlog::color_mode::always
                                                                                          : spdlog::color_mode::never);
    spdlog::set_default_logger(std::make_shared<spdlog::logger>("", std::move(sink)));
}

// `--color auto|always|never` on `app` (before or after the subcommand); the logger follows it from
// the start, so every line of the run, the first included, is coloured or not.
inline void add_color_option(CLI::App& app) {
    use_log_color(LogColor::automatic);
    app.add_option_function<LogColor>("--color", use_log_color, "Colour in the log: auto (a terminal, NO_COLOR unset), always or never")
        ->transform(enum_choices<LogColor>())
        ->trigger_on_parse();
    app.fallthrough();
}

}  // namespace hnas::command_line
