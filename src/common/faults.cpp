// Test-only fault injection (faults.h).
#include "canzona/common/faults.h"

#include <array>

namespace canzona::faults {
namespace {

constexpr std::size_t kFaults = static_cast<std::size_t>(Fault::kStallAfterStep) + 1;

std::array<Site, kFaults>& sites() {
  static std::array<Site, kFaults> armed{};
  return armed;
}

}  // namespace

void arm(Fault fault, Site where) {
  sites()[static_cast<std::size_t>(fault)] = where;
}

void disarm(Fault fault) {
  sites()[static_cast<std::size_t>(fault)] = Site{};
}

void disarm_all() {
  sites().fill(Site{});
}

Site site(Fault fault) {
  return sites()[static_cast<std::size_t>(fault)];
}

bool fires(Fault fault, int rank) {
  const Site s = site(fault);
  return s.rank >= 0 && s.rank == rank;
}

bool fires(Fault fault, int rank, std::int64_t step) {
  const Site s = site(fault);
  return s.rank >= 0 && s.rank == rank && s.step == step;
}

}  // namespace canzona::faults
