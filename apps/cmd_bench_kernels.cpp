// `canzona bench-kernels`: placeholder until its issue lands; it refuses with a clear error.
#include "canzona/common/error.h"
#include "command.h"

namespace canzona::apps {

void add_bench_kernels_command(CLI::App& app, int& exit_code) {
  auto* sub = app.add_subcommand("bench-kernels", "(not built yet)");
  sub->callback([&exit_code] {
    exit_code = 2;
    throw UsageError("'bench-kernels' is not built yet in this version");
  });
}

}  // namespace canzona::apps
