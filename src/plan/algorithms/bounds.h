// Lower bounds on the makespan of placing work on identical bins (ranks), used by compute_metrics
// to judge plans: no placement, however clever, can beat them.
//
// Terms. m identical bins; n atomic *items* (a whole matrix param on the DP axis, one task on the
// grid), each placed whole on one bin; a *divisible* mass D that may be split anywhere (AdamW on
// element-wise params). Makespan = the largest bin load. mean = (Σ items + D) / m. Items are
// sorted by size descending, p_1 >= p_2 >= ... >= p_n. Each bound, with its proof:
//   (a) mean:        the bins hold all the work, so the largest holds at least the average.
//   (b) largest:     p_1 sits whole on some bin.
//   (c) pigeonhole:  for k >= 1 with k·m + 1 <= n, the k·m + 1 largest items on m bins put at
//                    least k + 1 of them on one bin, which then holds at least the k + 1 smallest
//                    of them: p_{km+1-k} + ... + p_{km+1} (k = 1: p_m + p_{m+1}). D only raises
//                    the mean; it cannot shrink the bin holding those items.
//   (d) few items:   with n <= m, (c) claims nothing and max(a, b) is the bound; when D = 0 it
//                    is exact (one item per bin achieves p_1), so no further term exists there.
//                    Divisible mass never strengthens (b) or (c): it can fill any gap.
// The bound is max(a, b, c). (c) is a sum, so it is rounded down by a relative 1e-12: a load summed
// from the same numbers in another order can then never fall below it. O(n log n) for the sort
// (n = distinct BoundItems), then O(n / m · log n) for (c).
#pragma once

#include <cstdint>
#include <vector>

namespace canzona::plan {

// `count` equal atomic items of `size` each (a task computed on several ranks is that many items:
// copies are placed independently in the bound, a relaxation of any rule that ties them).
struct BoundItem {
  double size = 0.0;
  std::int64_t count = 1;
};

// The components of the bound, in absolute load units (the items' unit).
struct MakespanBound {
  double mean = 0.0;        // (a)
  double largest = 0.0;     // (b)
  double pigeonhole = 0.0;  // (c), best k; 0 when n <= m
  std::int64_t pigeonhole_k = 0;
  double value() const;  // max of the components
  // value() / mean: 1 when the bound is the mean (perfect balance possible), 1 when mean is 0.
  double relative() const;
};

// Needs bins >= 1, sizes and counts >= 0, divisible >= 0 (negative values are treated as 0).
MakespanBound makespan_lower_bound(std::vector<BoundItem> items, double divisible,
                                   std::int64_t bins);
// The same with one item per size.
MakespanBound makespan_lower_bound(const std::vector<double>& sizes, double divisible,
                                   std::int64_t bins);

}  // namespace canzona::plan
