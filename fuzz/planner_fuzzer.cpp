// Fuzz target: the planner. The bytes choose a small ModelSpec (1..12 params, 1-D or 2-D shapes up
// to 512 x 512, now and then a dim of 2^16..2^62; split dims, optimizer classes, layers, stages,
// row pieces) and PlanOptions (every strategy and variant, dp 0..8 or now and then up to 2^20,
// tp 1..4, pp 1..4, alpha / cmax_mb sometimes out of range, every cost kind but calibrated, bucket
// size up to 2^62, alignment, padding); then plan::make_plan. UsageError is an accepted outcome
// (make_plan validates its input); on success the plan must satisfy:
//   - every param of the model is in exactly one stage, owner[] = -1 for params of other stages;
//   - asc / lb-asc: each bucket has dp + 1 monotone cuts from 0 to the bucket numel; every matrix
//     param is owned by a DP rank in [0, dp) whose shard holds its whole slot; an element-wise
//     param is owned by such a rank or kDivided;
//   - sc / layerwise: no cuts, owners in [0, dp) or kEveryone;
//   - tasks name params of the stage, hosts lie in [kAllTp, tp), groups index their rank's list;
//   - make_plan is deterministic (the same plan_hash twice; checked for dp <= 4096).
// Seeds: fuzz/corpus/planner/ (random byte strings; the format is this file's decoder).
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <set>

#include "canzona/plan/plan.h"
#include "fuzz_common.h"

using namespace canzona;

namespace {

model::ModelSpec random_model(fuzz::Bytes& in) {
  model::ModelSpec spec;
  spec.name = "fuzz";
  const int layers = static_cast<int>(in.range(0, 4));
  spec.arch.num_layers = layers;
  const int n = static_cast<int>(in.range(1, 12));
  for (int i = 0; i < n; ++i) {
    model::ParamSpec p;
    const int kind = static_cast<int>(in.range(0, 7));
    p.name = (kind == 7 ? "embedding.p" : "p") + std::to_string(i);
    if (in.range(0, 31) == 0) p.name = "p0";  // occasionally a duplicate name
    const bool two_d = in.range(0, 3) != 0;
    p.shape.push_back(in.range(0, 511) + (in.range(0, 15) == 0 ? 0 : 1));
    if (two_d) p.shape.push_back(in.range(1, 512));
    if (in.range(0, 31) == 0) p.shape[0] = std::int64_t{1} << in.range(16, 62);  // huge dims

    if (in.range(0, 63) == 0) p.shape.push_back(2);  // occasionally 3-D
    p.tp_split_dim = static_cast<int>(in.range(-1, 1));
    p.optimizer = two_d && in.range(0, 3) != 0 ? model::OptimizerClass::kMatrix
                                               : model::OptimizerClass::kElementwise;
    p.layer = layers > 0 ? static_cast<int>(in.range(-1, layers - 1)) : -1;
    if (in.range(0, 7) == 0) p.stage = static_cast<int>(in.range(-1, 3));
    if (p.is_matrix() && in.flag()) {
      // Contiguous pieces covering the rows, cut at random points.
      std::int64_t begin = 0;
      const std::int64_t rows = p.shape[0];
      int k = 0;
      while (begin < rows) {
        std::int64_t end = in.left() == 0 ? rows : std::min(rows, begin + in.range(1, 256));
        p.pieces.push_back({std::string("x").append(std::to_string(k++)), {{begin, end}}});
        begin = end;
      }
    }
    spec.params.push_back(std::move(p));
  }
  return spec;
}

plan::PlanOptions random_options(fuzz::Bytes& in) {
  plan::PlanOptions o;
  o.strategy = static_cast<plan::Strategy>(in.range(0, 3));
  o.variant = static_cast<plan::PlannerVariant>(in.range(0, 1));
  o.dims.dp = static_cast<int>(in.range(0, 8));
  if (in.range(0, 31) == 0) o.dims.dp = 1 << in.range(4, 20);  // up to 2^20 ranks
  o.dims.tp = 1 << in.range(0, 2);
  if (in.range(0, 15) == 0) o.dims.tp = 3;
  o.dims.pp = static_cast<int>(in.range(1, 4));
  const double alphas[] = {0.0, 0.25, 0.5, 1.0, -0.5, 1.5, std::nan("")};
  o.alpha = alphas[in.range(0, 6)];
  const double cmaxes[] = {512.0, 0.001, 0.01, 1.0, 0.0, -1.0, 1e300};
  o.cmax_mb = cmaxes[in.range(0, 6)];
  o.asc_group_tasks = static_cast<int>(in.range(0, 4));
  o.cost.kind = static_cast<cost::CostKind>(in.range(0, 2));
  const char* const matrix_optimizers[] = {"muon", "shampoo", "soap"};
  o.cost.matrix_optimizer = matrix_optimizers[in.range(0, 2)];
  const std::int64_t max_precond_dim = in.range(1, 600);  // drawn always: inputs keep their meaning
  if (o.cost.matrix_optimizer != "muon")
    o.cost.optimizer_options["max_precond_dim"] = max_precond_dim;
  o.layout.bucket_size = in.range(0, 4) == 0 ? 0 : in.range(1, 70000);
  if (in.range(0, 31) == 0) o.layout.bucket_size = std::int64_t{1} << in.range(20, 62);
  o.layout.param_align = in.range(1, 128);
  o.layout.pad_bucket_end = in.flag();
  return o;
}

void check_plan(const model::ModelSpec& spec, const plan::PlanOptions& o, const plan::Plan& p) {
  const int n = static_cast<int>(spec.params.size());
  const bool cut = o.strategy == plan::Strategy::kAsc || o.strategy == plan::Strategy::kLbAsc;
  std::vector<int> seen(n, 0);
  if (static_cast<int>(p.stages.size()) != o.dims.pp) fuzz::finding("stage count != pp");
  for (const plan::StagePlan& s : p.stages) {
    if (static_cast<int>(s.owner.size()) != n) fuzz::finding("owner[] size != param count");
    std::set<int> mine(s.params.begin(), s.params.end());
    for (int i : s.params) {
      if (i < 0 || i >= n) fuzz::finding("stage names a param out of range");
      ++seen[i];
    }
    for (int i = 0; i < n; ++i) {
      const int owner = s.owner[i];
      if (!mine.count(i)) {
        if (owner != -1) fuzz::finding("owner set for a param of another stage");
        continue;
      }
      const bool ok_rank = owner >= 0 && owner < o.dims.dp;
      if (cut) {
        if (!(ok_rank || (owner == plan::kDivided && !spec.params[i].is_matrix()))) {
          fuzz::finding("asc/lb-asc: param " + std::to_string(i) + " has owner " +
                        std::to_string(owner));
        }
      } else if (!(ok_rank || owner == plan::kEveryone)) {
        fuzz::finding("sc/layerwise: param " + std::to_string(i) + " has owner " +
                      std::to_string(owner));
      }
    }
    if (cut) {
      if (s.cuts.size() != s.layout.buckets.size()) fuzz::finding("cuts per bucket missing");
      for (std::size_t b = 0; b < s.cuts.size(); ++b) {
        const std::vector<std::int64_t>& c = s.cuts[b];
        const layout::Bucket& bucket = s.layout.buckets[b];
        if (static_cast<int>(c.size()) != o.dims.dp + 1) fuzz::finding("cuts size != dp + 1");
        if (c.front() != 0 || c.back() != bucket.numel) fuzz::finding("cuts do not span bucket");
        for (std::size_t r = 1; r < c.size(); ++r) {
          if (c[r] < c[r - 1]) fuzz::finding("cuts not monotone");
        }
        for (const layout::Slot& slot : bucket.slots) {
          const int owner = s.owner[slot.param];
          if (owner >= 0 && !(c[owner] <= slot.offset && slot.end() <= c[owner + 1])) {
            fuzz::finding("owned param " + std::to_string(slot.param) +
                          " outside its owner's shard");
          }
        }
      }
    } else if (!s.cuts.empty()) {
      fuzz::finding("sc/layerwise plan has cuts");
    }
    for (const plan::Task& t : s.tasks) {
      if (!mine.count(t.param)) fuzz::finding("task of a param outside the stage");
      if (!spec.params[t.param].is_matrix()) fuzz::finding("task of an element-wise param");
      if (t.host < plan::kAllTp || t.host >= o.dims.tp) fuzz::finding("task host out of range");
      if (!(t.cost >= 0.0) || !std::isfinite(t.cost)) fuzz::finding("task cost not finite >= 0");
    }
    for (std::size_t r = 0; r < s.groups.size(); ++r) {
      for (const plan::MicroGroup& g : s.groups[r]) {
        for (int t : g.tasks) {
          if (t < 0 || t >= static_cast<int>(s.tasks.size())) fuzz::finding("group task index");
        }
      }
    }
  }
  for (int i = 0; i < n; ++i) {
    if (seen[i] != 1) fuzz::finding("param " + std::to_string(i) + " not in exactly one stage");
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  fuzz::Bytes in(data, size);
  const model::ModelSpec spec = random_model(in);
  const plan::PlanOptions options = random_options(in);
  fuzz::expect_success_or_usage_error("make_plan", [&] {
    const plan::Plan p = plan::make_plan(spec, options);
    check_plan(spec, options, p);
    // Planning is linear in dp (about 1 s per 2^19 ranks in Release, 3x that under ASan), so the
    // second plan is made for grids up to 4096 DP ranks only: it would double the time of the
    // 2^20-rank inputs and push them past `make fuzz`'s per-input timeout.
    if (options.dims.dp <= 4096 &&
        plan::plan_hash(plan::make_plan(spec, options)) != plan::plan_hash(p)) {
      fuzz::finding("make_plan is not deterministic");
    }
  });
  return 0;
}
