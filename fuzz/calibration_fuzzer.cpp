// Fuzz target: the calibration file reader behind --calibration FILE (cost::Calibration::read).
// A calibration that loads must answer seconds() for every optimizer it has a fit for with a
// finite, non-negative value on a few shapes, and survive write -> read.
// Seeds: fuzz/corpus/calibration/ (tests/apps/data/calibration.json and variants).
#include "canzona/cost/calibration.h"

#include <cmath>
#include <cstddef>
#include <cstdint>

#include "canzona/optim/optimizer.h"
#include "fuzz_common.h"

using namespace canzona;

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string path = fuzz::scratch_file("calibration", data, size);
  fuzz::expect_success_or_usage_error("Calibration::read", [&] {
    const cost::Calibration cal = cost::Calibration::read(path);
    const cost::CostOptions options;
    for (const std::string& name : optim::optimizer_names()) {
      if (!cal.fit_of(name).present) continue;
      for (std::int64_t side : {1, 128, 4096}) {
        const double s = cal.seconds(name, side, 2 * side, options);
        if (!std::isfinite(s) || s < 0.0) fuzz::finding("seconds() not finite and >= 0");
      }
    }
    const std::string copy = path + ".roundtrip.json";
    cal.write(copy);
    try {
      (void)cost::Calibration::read(copy);
    } catch (const std::exception& e) {
      fuzz::finding(std::string("Calibration::read rejected Calibration::write's output: ") +
                    e.what());
    }
  });
  return 0;
}
