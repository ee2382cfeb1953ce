// Option values out of range are UsageErrors naming the optimizer, the key and the bound: before
// this check max_precond_dim -5 was accepted, precondition_frequency 0 divided by zero
// and beta2 1 divided by zero in Adam's bias correction. Each row: an optimizer, one bad option,
// and the words its error must contain; the same options at the edge of the range are accepted.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "canzona/common/error.h"
#include "canzona/optim/optimizer.h"

namespace canzona::optim {
namespace {

struct Bad {
  const char* optimizer;
  nlohmann::json options;
  const char* words;
};

std::string error_of(const char* optimizer, const nlohmann::json& options) {
  try {
    create_optimizer(optimizer, ParamInfo{"w", 4, 4}, options);
  } catch (const UsageError& e) {
    return e.what();
  }
  return "";
}

TEST(OptionValues, OutOfRangeValuesNameOptimizerKeyAndLimit) {
  const std::vector<Bad> cases = {
      {"shampoo",
       {{"max_precond_dim", -5}},
       "shampoo option 'max_precond_dim' = -5 must lie in [1, 65536] (kMaxPrecondDim)"},
      {"soap", {{"max_precond_dim", 1 << 20}}, "soap option 'max_precond_dim' = 1048576"},
      {"soap", {{"precondition_frequency", 0}}, "soap option 'precondition_frequency' = 0"},
      {"shampoo", {{"precondition_frequency", -1}}, "shampoo option 'precondition_frequency'"},
      {"adamw",
       {{"beta2", 1.0}},
       "adamw option 'beta2' = 1 must be a finite number in [0, 0.9999999] (kMaxBeta)"},
      {"soap", {{"shampoo_beta", -0.5}}, "soap option 'shampoo_beta' = -0.5"},
      {"muon", {{"momentum", 1.5}}, "muon option 'momentum' = 1.5"},
      {"muon", {{"lr", -0.1}}, "muon option 'lr' = -0.1"},
      {"adamw", {{"weight_decay", 1e9}}, "kMaxRate"},
      {"adamw", {{"eps", 0.0}}, "adamw option 'eps' = 0"},
      {"shampoo", {{"graft_eps", -1e-8}}, "shampoo option 'graft_eps'"},
      {"muon", {{"ns_steps", -1}}, "muon option 'ns_steps' = -1"},
      {"muon", {{"ns_steps", 101}}, "kMaxNsSteps"},
  };
  for (const Bad& c : cases) {
    const std::string message = error_of(c.optimizer, c.options);
    EXPECT_NE(message.find(c.words), std::string::npos)
        << c.optimizer << " " << c.options.dump() << ": '" << message << "'";
  }
}

TEST(OptionValues, EdgesOfTheRangesAreAccepted) {
  EXPECT_EQ(error_of("shampoo", {{"max_precond_dim", 1}, {"precondition_frequency", 1}}), "");
  EXPECT_EQ(error_of("soap", {{"max_precond_dim", 65536}, {"beta2", 0.9999999}}), "");
  EXPECT_EQ(error_of("muon", {{"ns_steps", 0}, {"momentum", 0.0}, {"lr", 0.0}}), "");
  EXPECT_EQ(error_of("adamw", {{"eps", 1e-30}, {"weight_decay", 0.0}}), "");
}

}  // namespace
}  // namespace canzona::optim
