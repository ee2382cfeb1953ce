#include "bucket_schedule.h"

#include <algorithm>

#include "canzona/common/error.h"

namespace canzona::train {

BucketSchedule::BucketSchedule(engine::Engine& engine,
                               const std::vector<std::vector<int>>& segments)
    : engine_(engine) {
  int num_buckets = 0;
  for (const std::vector<int>& params : segments)
    for (int p : params) num_buckets = std::max(num_buckets, engine.bucket_of(p) + 1);
  last_read_.assign(static_cast<std::size_t>(num_buckets), -1);
  params_in_.assign(static_cast<std::size_t>(num_buckets), 0);
  accumulated_.assign(static_cast<std::size_t>(num_buckets), 0);
  std::vector<char> counted;
  for (std::size_t s = 0; s < segments.size(); ++s) {
    std::vector<int> buckets;
    for (int p : segments[s]) {
      const int b = engine.bucket_of(p);
      CANZONA_CHECK(b >= 0, "param ", p, " of the forward is not in the engine's stage");
      buckets.push_back(b);
      last_read_[static_cast<std::size_t>(b)] = static_cast<int>(s);
      if (counted.size() <= static_cast<std::size_t>(p)) counted.resize(p + 1, 0);
      if (!counted[static_cast<std::size_t>(p)]) ++params_in_[static_cast<std::size_t>(b)];
      counted[static_cast<std::size_t>(p)] = 1;
    }
    std::sort(buckets.begin(), buckets.end());
    buckets.erase(std::unique(buckets.begin(), buckets.end()), buckets.end());
    buckets_.push_back(std::move(buckets));
  }
}

void BucketSchedule::prefetch(int segment) {
  if (segment < 0 || segment >= static_cast<int>(buckets_.size())) return;
  for (int b : buckets_[static_cast<std::size_t>(segment)]) engine_.prefetch_params(b);
}

double BucketSchedule::wait(int segment) {
  double exposed = 0.0;
  for (int b : buckets_.at(static_cast<std::size_t>(segment)))
    exposed += engine_.wait_param_sync(b);
  return exposed;
}

double BucketSchedule::before_forward(int segment) {
  const double exposed = wait(segment);
  prefetch(segment + 1);
  return exposed;
}

void BucketSchedule::after_forward(int segment, bool backward_follows) {
  const std::vector<int>& last = buckets_.back();
  for (int b : buckets_.at(static_cast<std::size_t>(segment))) {
    if (last_read_[static_cast<std::size_t>(b)] != segment) continue;
    if (backward_follows && std::binary_search(last.begin(), last.end(), b)) continue;
    engine_.release_params(b);
  }
}

double BucketSchedule::before_backward(int segment) {
  const double exposed = wait(segment);
  prefetch(segment - 1);
  return exposed;
}

void BucketSchedule::accumulated(int p) {
  const auto b = static_cast<std::size_t>(engine_.bucket_of(p));
  if (++accumulated_[b] < params_in_[b]) return;
  accumulated_[b] = 0;
  engine_.release_params(static_cast<int>(b));
}

}  // namespace canzona::train
