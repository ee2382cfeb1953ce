// The DP gradient sync, the engine's DistributedDataParallel part: it owns the grad-ready protocol
// of a step and one collective per bucket, posted when the bucket's last param is ready, after the
// bucket is scaled by 1/DP (grad_scale, Megatron's gradient_scaling_factor). Which collective is
// the strategy's plan::DpSync; the reduced gradient it leaves is read through reduced_grad().
// Under ZeRO-3 each bucket's gradients are given back (ParamBuffers::release_grads) as soon as its
// collective completes: only the reduced shard stays.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "buffers.h"
#include "canzona/comm/communicator.h"
#include "collectives.h"
#include "context.h"

namespace canzona::engine {

class GradSync {
 public:
  GradSync(const RankContext& context, comm::Communicator& dp, ParamBuffers& buffers,
           CollectiveWaits& waits);
  virtual ~GradSync() = default;
  GradSync(const GradSync&) = delete;
  GradSync& operator=(const GradSync&) = delete;

  // Marks p's gradient as written; posts its bucket's collective when p completes the bucket.
  // Throws Error when p is not in the stage or is marked twice in one step.
  void mark_ready(int p);
  // Request::test() on every collective in flight.
  void progress();
  // Waits for every bucket of the step and starts the next step's protocol; returns the exposed
  // ms. Throws Error unless every bucket was posted.
  double finish();

  // The reduced gradient of `param` from element `slot_element` of its slot on, where this rank
  // holds it, in the gradient buffer's dtype; throws Error elsewhere.
  virtual ConstTypedPtr reduced_grad(int param, std::int64_t slot_element = 0) const = 0;
  virtual std::vector<GradRange> reduced() const = 0;
  virtual bool sharded() const = 0;

 protected:
  // Posts bucket b's collective on its scaled gradients; returns its request.
  virtual comm::Request post(int b, TypedSpan scaled) = 0;
  virtual const char* collective() const = 0;  // trace label
  // Destroys the requests, which wait for collectives still in flight without throwing: a
  // subclass whose buffers a collective writes calls it in its destructor.
  void drop_in_flight() { pending_.clear(); }

  const RankContext& context_;
  comm::Communicator& dp_;
  ParamBuffers& buffers_;

 private:
  CollectiveWaits& waits_;
  std::vector<int> ready_;         // [bucket] params marked ready this step
  std::vector<char> param_ready_;  // [model param]
  std::vector<Pending> pending_;   // [bucket]
  bool give_back_;                 // ZeRO-3
  std::vector<char> given_back_;   // [bucket] this step
};

std::unique_ptr<GradSync> make_grad_sync(const RankContext& context, comm::Communicator& dp,
                                         ParamBuffers& buffers, CollectiveWaits& waits);

}  // namespace canzona::engine
