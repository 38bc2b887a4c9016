// One function per subcommand group; each adds its subcommands (flags, help, callback) to the app.
// The callbacks parse nothing themselves beyond CLI11's flags and call into the library.
#pragma once

#include <CLI/CLI.hpp>

namespace hnas::cli {

void add_demo_command(CLI::App& app);                     // train_commands.cpp
void add_train_command(CLI::App& app, int& exit_code);    // train_commands.cpp
void add_vocab_command(CLI::App& app);                    // train_commands.cpp
void add_weights_command(CLI::App& app);                  // train_commands.cpp
void add_prepare_command(CLI::App& app);                  // prepare_command.cpp
void add_inspect_command(CLI::App& app);                  // inspect_command.cpp
void add_rouge_command(CLI::App& app);                    // eval_commands.cpp
void add_decode_command(CLI::App& app);                   // eval_commands.cpp
void add_eval_command(CLI::App& app);                     // eval_commands.cpp
void add_predict_command(CLI::App& app);                  // eval_commands.cpp
void add_bert_commands(CLI::App& app);                    // bert_commands.cpp: import-bert, export, hidden-states, tokenize
void add_analyze_command(CLI::App& app);                  // analyze_commands.cpp
void add_dual_commands(CLI::App& analyze);                // analyze_dual_commands.cpp: analyze dual, dual-example
void add_toy_command(CLI::App& app);                      // toy_command.cpp
void add_sweep_command(CLI::App& app, int& exit_code);    // experiment_commands.cpp
void add_test_command(CLI::App& app);                     // experiment_commands.cpp
void add_compare_command(CLI::App& app);                  // experiment_commands.cpp
void add_report_command(CLI::App& app);                   // experiment_commands.cpp

}  // namespace hnas::cli
