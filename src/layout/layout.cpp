#include "canzona/layout/layout.h"

#include <numeric>

#include "canzona/common/checked.h"
#include "canzona/common/error.h"

namespace canzona::layout {
namespace {

// value rounded up to a multiple of `multiple` (> 0); throws UsageError naming `what` on overflow.
std::int64_t round_up(std::int64_t value, std::int64_t multiple, const char* what) {
  return checked_mul(checked_add(value, multiple - 1, what) / multiple, multiple, what);
}

}  // namespace

std::int64_t effective_bucket_size(const LayoutOptions& options) {
  if (options.bucket_size > 0) return options.bucket_size;
  return std::max<std::int64_t>(40'000'000, 1'000'000 * static_cast<std::int64_t>(options.dp));
}

Layout build_layout(const model::ModelSpec& model, const std::vector<int>& params,
                    const LayoutOptions& options) {
  CANZONA_REQUIRE(options.dp > 0, "dp must be positive (got ", options.dp, ")");
  CANZONA_REQUIRE(options.tp > 0, "tp must be positive (got ", options.tp, ")");
  CANZONA_REQUIRE(options.bucket_size >= 0, "bucket size must be >= 0, 0 = Megatron default (got ",
                  options.bucket_size, ")");
  require_in_range(options.bucket_size, 0, kMaxBucketSize, "bucket size", "kMaxBucketSize");
  CANZONA_REQUIRE(options.param_align > 0, "param alignment must be positive (got ",
                  options.param_align, ")");
  require_in_range(options.param_align, 1, kMaxParamAlign, "param alignment", "kMaxParamAlign");
  const std::int64_t bucket_size = effective_bucket_size(options);
  const std::int64_t end_align =
      options.pad_bucket_end ? std::lcm<std::int64_t>(options.dp, 128) : 1;

  Layout layout;
  Bucket current;
  current.offset = 0;
  std::int64_t cursor = 0;  // next free element relative to the current bucket start
  auto close_bucket = [&] {
    current.numel = round_up(cursor, end_align, "layout: bucket end padding");
    layout.numel = checked_add(current.offset, current.numel, "layout: buffer size");
    layout.buckets.push_back(std::move(current));
    current = Bucket{};
    current.offset = layout.numel;
    cursor = 0;
  };
  // Megatron bucket rule: reverse registration order; a bucket closes right after the param
  // whose end makes it reach bucket_size.
  for (auto it = params.rbegin(); it != params.rend(); ++it) {
    const model::ParamSpec& param = model.params.at(static_cast<std::size_t>(*it));
    Slot slot;
    slot.param = *it;
    slot.offset = round_up(cursor, options.param_align, "layout: param offset");
    slot.numel = param.local_numel(options.tp);
    cursor = checked_add(slot.offset, slot.numel, "layout: bucket size");
    current.slots.push_back(slot);
    if (cursor >= bucket_size) close_bucket();
  }
  if (!current.slots.empty()) close_bucket();
  return layout;
}

}  // namespace canzona::layout
