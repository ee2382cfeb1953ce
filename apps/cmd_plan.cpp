// `canzona plan`: placeholder until the planner lands.
#include "canzona/common/error.h"
#include "command.h"

namespace canzona::apps {

void add_plan_command(CLI::App& app, int& exit_code) {
  auto* sub = app.add_subcommand("plan", "(not built yet)");
  sub->callback([&exit_code] {
    exit_code = 2;
    throw UsageError("'plan' is not built yet in this version");
  });
}

}  // namespace canzona::apps
