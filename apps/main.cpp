// Entry point of the `canzona` CLI. Maps errors to exit codes: 0 success, 1 failure, 2 usage
// error (one line on stderr: "canzona: error: <what is wrong and where>").
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <filesystem>
#include <string>
#include <vector>

#include "canzona/comm/mpi.h"
#include "canzona/common/error.h"
#include "canzona/optim/blas_env.h"
#include "command.h"
#include "launch.h"

namespace {

// `canzona train ARGS` replaces this process with canzona-train ARGS (the executable next to this
// one), so only training loads libtorch. Returns only when argv does not select train.
void exec_train_if_selected(int argc, char** argv) {
  int at = 1;
  while (at < argc && argv[at][0] == '-') ++at;
  if (at >= argc || std::string(argv[at]) != "train") return;
  std::error_code error;
  const std::filesystem::path self = std::filesystem::read_symlink("/proc/self/exe", error);
  const std::string path = (self.parent_path() / "canzona-train").string();
  std::vector<char*> args = {const_cast<char*>(path.c_str())};
  for (int i = 1; i < argc; ++i)
    if (i != at) args.push_back(argv[i]);
  args.push_back(nullptr);
  execv(path.c_str(), args.data());
  std::fprintf(stderr, "canzona: error: train needs %s (build target canzona-train): %s\n",
               path.c_str(), std::strerror(errno));
  std::exit(2);
}

}  // namespace

int main(int argc, char** argv) {
  // OpenBLAS picks its kernels when the library loads, before main; fix a misdetected core by
  // re-executing with OPENBLAS_CORETYPE set (or refuse loudly). Returns only when it is fine.
  canzona::optim::ensure_blas_core(argc, argv);
  exec_train_if_selected(argc, argv);

  CLI::App app{"Canzona: exact, load-balanced matrix optimizers under ZeRO-1 DP and TP", "canzona"};
  app.require_subcommand(1);
  int exit_code = 0;
  canzona::apps::add_plan_command(app, exit_code);
  canzona::apps::add_bench_kernels_command(app, exit_code);
  canzona::apps::add_run_commands(app, exit_code);
  canzona::apps::add_simulate_command(app, exit_code);
  canzona::apps::add_ckpt_command(app, exit_code);
  app.add_subcommand("train",
                     "Train a Qwen3-architecture model under DP x TP (canzona train --help)");
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForAllHelp& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    // Under mpirun, every rank of `run`/`compare` is waiting to start MPI: agree, print once.
    if (canzona::apps::is_launch_command(argc, argv) && canzona::comm::launched_world_size() > 1)
      return canzona::apps::launch_error_exit(e.what());
    std::fprintf(stderr, "canzona: error: %s\n", e.what());
    return 2;
  } catch (const canzona::UsageError& e) {
    std::fprintf(stderr, "canzona: error: %s\n", e.what());
    return 2;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "canzona: failed: %s\n", e.what());
    return 1;
  }
  return exit_code;
}
