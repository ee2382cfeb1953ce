#include "canzona/common/error.h"

namespace canzona::detail {

void throw_check_failure(const char* file, int line, const std::string& what) {
  throw Error(str(file, ":", line, ": ", what));
}

}  // namespace canzona::detail
