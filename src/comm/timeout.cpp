#include "canzona/comm/timeout.h"

#include <atomic>
#include <utility>

#include "canzona/common/error.h"

namespace canzona::comm {
namespace {

std::atomic<double> g_timeout_s{kDefaultCollectiveTimeoutS};
thread_local std::string t_label;

}  // namespace

void set_collective_timeout(double seconds, const char* flag) {
  if (!(seconds > 0.0 && seconds <= kMaxCollectiveTimeoutS))
    throw UsageError(str(flag, " must be a number of seconds in (0, ", kMaxCollectiveTimeoutS,
                         "] (got ", seconds, ")"));
  g_timeout_s.store(seconds);
}

double collective_timeout() {
  return g_timeout_s.load();
}

ScopedOpLabel::ScopedOpLabel(std::string label) : saved_(std::move(t_label)) {
  t_label = std::move(label);
}

ScopedOpLabel::~ScopedOpLabel() {
  t_label = std::move(saved_);
}

const std::string& current_op_label() {
  return t_label;
}

}  // namespace canzona::comm
