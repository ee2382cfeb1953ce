// The `canzona` CLI: one file per subcommand. Each add_*_command registers its CLI11 subcommand
// on `app`; when the subcommand is selected its callback runs it and stores the exit code in
// `exit_code`. Commands report bad input by throwing canzona::UsageError (main maps it to exit
// code 2) and other failures by throwing canzona::Error (exit code 1).
#pragma once

#include <CLI/CLI.hpp>
#include <string>

namespace canzona::apps {

void add_plan_command(CLI::App& app, int& exit_code);
void add_bench_kernels_command(CLI::App& app, int& exit_code);
void add_run_commands(CLI::App& app, int& exit_code);  // `run` and `compare`
void add_simulate_command(CLI::App& app, int& exit_code);
void add_ckpt_command(CLI::App& app, int& exit_code);  // `ckpt inspect`

// True when argv selects `run` or `compare` (the first argument that is not an option).
bool is_launch_command(int argc, char** argv);
// launch_error_exit (launch.h) handles a command-line error of `run` / `compare` under a launcher.

}  // namespace canzona::apps
