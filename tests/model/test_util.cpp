#include "test_util.h"

namespace canzona::model::testing {
namespace {

class ScratchCleanup : public ::testing::Environment {
 public:
  void TearDown() override {
    std::error_code ec;
    for (const auto& dir : scratch_dirs()) std::filesystem::remove_all(dir, ec);
  }
};

::testing::Environment* const kScratchCleanup =
    ::testing::AddGlobalTestEnvironment(new ScratchCleanup);

}  // namespace

std::vector<std::filesystem::path>& scratch_dirs() {
  static std::vector<std::filesystem::path> dirs;
  return dirs;
}

}  // namespace canzona::model::testing
