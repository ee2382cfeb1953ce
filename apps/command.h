// The `canzona` CLI: one file per subcommand. Each add_*_command registers its CLI11 subcommand
// on `app`; when the subcommand is selected its callback runs it and stores the exit code in
// `exit_code`. Commands report bad input by throwing canzona::UsageError (main maps it to exit
// code 2) and other failures by throwing canzona::Error (exit code 1).
#pragma once

#include <CLI/CLI.hpp>

namespace canzona::apps {

void add_plan_command(CLI::App& app, int& exit_code);
void add_bench_kernels_command(CLI::App& app, int& exit_code);
void add_run_commands(CLI::App& app, int& exit_code);  // `run` and `compare`
void add_simulate_command(CLI::App& app, int& exit_code);

}  // namespace canzona::apps
