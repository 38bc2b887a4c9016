// The hnas command line: one executable, one subcommand per job. The subcommands live in this folder,
// one file per group (cli/commands.h); errors reach the user as one line naming what was wrong.
#include <spdlog/spdlog.h>

#include <iostream>

#include "backend/matmul.h"
#include "cli/commands.h"
#include "command_line/log_color.h"

// The exit statuses of hnas (README, "Exit statuses"): 0 done, 1 an error (one line naming it), 2 a
// command line that CLI11 rejected, 128 + N a training run that signal N stopped after its checkpoint.
constexpr int kUsageError = 2;

int main(int argc, char** argv) {
    hnas::backend::choose_openmp_waiting(argv);
    CLI::App app{"hnas: Transformer training with doubly-normalized attention"};
    app.require_subcommand(0, 1);
    bool show_version = false;
    app.add_flag("--version", show_version, "Print the version and the oneDNN backend, then exit");
    hnas::command_line::add_color_option(app);
    int exit_code = 0;
    hnas::cli::add_demo_command(app);
    hnas::cli::add_train_command(app, exit_code);
    hnas::cli::add_vocab_command(app);
    hnas::cli::add_weights_command(app);
    hnas::cli::add_prepare_command(app);
    hnas::cli::add_inspect_command(app);
    hnas::cli::add_rouge_command(app);
    hnas::cli::add_decode_command(app);
    hnas::cli::add_eval_command(app);
    hnas::cli::add_predict_command(app);
    hnas::cli::add_bert_commands(app);
    hnas::cli::add_analyze_command(app);
    hnas::cli::add_toy_command(app);
    hnas::cli::add_sweep_command(app, exit_code);
    hnas::cli::add_test_command(app);
    hnas::cli::add_compare_command(app);
    hnas::cli::add_report_command(app);
    try {
        app.parse(argc, argv);
    } catch (const CLI::ParseError& e) {
        // CLI11 prints the message (or the help) and returns a code of its own per kind of error (105 for
        // a bad value, 106 for a missing option, ...); hnas has one status for all of them.
        return app.exit(e) == 0 ? 0 : kUsageError;
    } catch (const std::exception& e) {
        spdlog::error("{}", e.what());
        return 1;
    }
    if (show_version) {
        std::cout << "hnas " << HNAS_VERSION << " (" << hnas::backend::describe() << ")\n";
    } else if (app.get_subcommands().empty()) {
        std::cout << app.help();
    }
    return exit_code;
}
