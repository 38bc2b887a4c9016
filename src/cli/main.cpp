// The hnas command line: one executable, one subcommand per job.
#include <CLI/CLI.hpp>
#include <iostream>

#include "backend/matmul.h"

int main(int argc, char** argv) {
    CLI::App app{"hnas: Transformer training with doubly-normalized attention"};
    app.require_subcommand(0, 1);
    bool show_version = false;
    app.add_flag("--version", show_version, "Print the version and the oneDNN backend, then exit");
    CLI11_PARSE(app, argc, argv);
    if (show_version) {
        std::cout << "hnas " << HNAS_VERSION << " (" << hnas::backend::describe() << ")\n";
        return 0;
    }
    std::cout << app.help();
    return 0;
}
