#include "canzona/comm/request.h"

#include <cstdio>
#include <exception>

namespace canzona::comm {

Request& Request::operator=(Request&& other) noexcept {
  if (this != &other) {
    abandon();
    impl_ = std::move(other.impl_);
  }
  return *this;
}

Request::~Request() {
  abandon();
}

void Request::wait() {
  if (!impl_) return;
  std::unique_ptr<Impl> impl = std::move(impl_);
  impl->wait();
}

bool Request::test() {
  return !impl_ || impl_->test();
}

void Request::abandon() noexcept {
  if (!impl_) return;
  try {
    wait();
  } catch (const std::exception& e) {
    std::fprintf(stderr, "canzona: a pending request was abandoned and its wait failed: %s\n",
                 e.what());
  } catch (...) {
    std::fprintf(stderr, "canzona: a pending request was abandoned and its wait failed\n");
  }
}

}  // namespace canzona::comm
