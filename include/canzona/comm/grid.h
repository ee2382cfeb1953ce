// Process grid DP x TP x PP in Megatron order (docs/design.md section 2).
//
// Terms. The world's ranks form a grid of shape (pp, dp, tp) with tp varying fastest:
// world rank = (pp_index * DP + dp_index) * TP + tp_index (canzona::ParallelDims in
// common/parallel_dims.h, which also holds the expert degrees ep and etp). A rank's *coordinates*
// are those three indices. Its *DP group* is the DP ranks with the same (pp, tp) indices, ordered
// by dp index; its *TP group* the TP ranks with the same (pp, dp) indices, ordered by tp index
// (consecutive world ranks); its *PP group* the PP ranks with the same (dp, tp) indices, ordered by
// pp index (the pipeline its stages' activations travel along). Its *embedding group* (Megatron's
// _EMBEDDING_GROUP, over which the tied input and output embeddings' gradients are summed) is the
// first and the last pipeline stage's ranks of its (dp, tp) coordinates, first stage first: two
// ranks when PP > 1, the rank alone when PP == 1; ranks of the middle stages are in none. A Grid
// owns one Communicator per group it is in plus one over the whole world; the rank of this process
// in the DP, TP and PP group equals its coordinate along that axis, in the embedding group it is 0
// on the first stage and 1 on the last (PP > 1).
#pragma once

#include <memory>

#include "canzona/comm/communicator.h"
#include "canzona/common/parallel_dims.h"

namespace canzona::comm {

using canzona::ExpertCoord;
using canzona::GridCoord;
using canzona::ParallelDims;

class Grid {
 public:
  // Takes this rank's communicators; `embedding` is null exactly when the rank is on a middle
  // stage (0 < coord.pp < dims.pp - 1). Throws canzona::UsageError when dims fails
  // ParallelDims::check(); canzona::Error when a communicator's size or rank does not match dims
  // and coord.
  Grid(const ParallelDims& dims, const GridCoord& coord, std::unique_ptr<Communicator> world,
       std::unique_ptr<Communicator> dp, std::unique_ptr<Communicator> tp,
       std::unique_ptr<Communicator> pp, std::unique_ptr<Communicator> embedding);

  const ParallelDims& dims() const { return dims_; }
  const GridCoord& coord() const { return coord_; }

  Communicator& world() { return *world_; }
  Communicator& dp() { return *dp_; }
  Communicator& tp() { return *tp_; }
  Communicator& pp() { return *pp_; }

  // True on the first and the last pipeline stage (every rank when PP == 1).
  bool in_embedding_group() const { return embedding_ != nullptr; }
  // The embedding group; canzona::Error on a rank of a middle stage.
  Communicator& embedding();

 private:
  ParallelDims dims_;
  GridCoord coord_;
  std::unique_ptr<Communicator> world_;
  std::unique_ptr<Communicator> dp_;
  std::unique_ptr<Communicator> tp_;
  std::unique_ptr<Communicator> pp_;
  std::unique_ptr<Communicator> embedding_;
};

// True when a rank at pipeline index `pp_index` of `pp` stages is in an embedding group (the first
// or the last stage).
inline bool is_embedding_stage(int pp_index, int pp) {
  return pp_index == 0 || pp_index == pp - 1;
}

// Megatron's expert groups of a mixture-of-experts model (docs/cli.md, "Mixture of experts").
// Inside a pipeline stage the dp x tp ranks, numbered l = dp_index x tp + tp_index, are also an
// expert grid of expert DP x EP x expert TP with expert TP fastest: etp = l % etp,
// ep = (l / etp) % ep, edp = l / (etp x ep), edp = dp x tp / (ep x etp)
// (ParallelDims::expert_coord).
//
// This rank's expert groups: `grid` is the expert grid of its EP rank's slice (world: the ranks of
// every stage with its ep index, in (pp, edp, etp) order; dims {dp = edp, tp = etp, pp}; its DP
// group the expert DP group, its TP group the expert TP group, its PP and embedding groups those
// rules applied to this grid: the ranks of every stage with its (edp, ep, etp), and their first
// and last stage; coordinates {pp, edp, etp}); `ep` the EP group (same pp, edp and etp indices,
// ordered by ep index), over which tokens are dispatched. The degrees ep and etp are the dense
// grid's (Grid::dims()).
struct ExpertGroups {
  ExpertCoord coord;
  std::unique_ptr<Grid> grid;
  std::unique_ptr<Communicator> ep;
};

}  // namespace canzona::comm
