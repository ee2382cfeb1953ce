// Handle to one nonblocking collective or point-to-point message (docs/design.md section 4).
//
// Terms. An operation (a collective, an isend or an irecv) is *posted* when a Communicator call
// returns its Request; it is *pending* until wait() returns. While pending, the caller may
// compute, but must not write the call's send buffer, nor read or write its receive buffer. A
// Request is move-only and owns whatever the operation needs until completion (count arrays,
// scratch buffers). An *empty* Request (default-constructed, moved-from or already waited) is not
// pending; wait() on it returns at once. Abandoning a pending Request (destroying it, or
// move-assigning over it) waits for it: that never throws; a failure during that wait is reported
// as one line on stderr. Every Request must finish before the Communicator that posted it is
// destroyed.
#pragma once

#include <memory>

namespace canzona::comm {

class Request {
 public:
  // What a Communicator implementation plugs in: one posted operation.
  class Impl {
   public:
    virtual ~Impl() = default;
    // Blocks until the operation completes and its receive buffer holds the result. Called at most
    // once. Throws canzona::Error when the backend reports a failure.
    virtual void wait() = 0;
    // Drives the operation without blocking (a single-node MPI transfer only moves inside MPI
    // calls); true once the transfer has completed. wait() must still be called afterwards.
    // Throws canzona::Error when the backend reports a failure.
    virtual bool test() = 0;
  };

  Request() = default;
  explicit Request(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
  Request(Request&&) noexcept = default;
  Request& operator=(Request&& other) noexcept;
  Request(const Request&) = delete;
  Request& operator=(const Request&) = delete;
  ~Request();

  // Blocks until complete; afterwards the Request is empty. Throws canzona::Error on a backend
  // failure (the Request is empty afterwards too).
  void wait();

  // Lets the operation progress while the caller computes (call it between pieces of work); true
  // when the transfer is done or the Request is empty. The Request stays pending until wait().
  bool test();

  bool pending() const { return impl_ != nullptr; }

 private:
  void abandon() noexcept;

  std::unique_ptr<Impl> impl_;
};

}  // namespace canzona::comm
