// Process grid DP x TP x PP in Megatron order (docs/design.md section 2).
//
// Terms. The world's ranks form a grid of shape (pp, dp, tp) with tp varying fastest:
// world rank = (pp_index * DP + dp_index) * TP + tp_index. A rank's *coordinates* are those three
// indices. Its *DP group* is the DP ranks with the same (pp, tp) indices, ordered by dp index; its
// *TP group* the TP ranks with the same (pp, dp) indices, ordered by tp index (consecutive world
// ranks). A Grid owns one Communicator per group plus one over the whole world; the rank of this
// process in each equals its coordinate along that axis.
#pragma once

#include <memory>

#include "canzona/comm/communicator.h"

namespace canzona::comm {

struct GridShape {
  int dp = 1;  // data-parallel degree
  int tp = 1;  // tensor-parallel degree
  int pp = 1;  // pipeline-parallel degree
};

struct GridCoord {
  int pp = 0;
  int dp = 0;
  int tp = 0;
};

// Throws canzona::UsageError unless every degree is >= 1 and dp * tp * pp == world_size, e.g.
// "world size 6 != dp 2 x tp 2 x pp 1". Needs no communication, so every rank fails identically.
void check_grid_shape(const GridShape& shape, int world_size);

// Coordinates of `world_rank` (0 <= world_rank < dp * tp * pp) and back.
GridCoord grid_coord(const GridShape& shape, int world_rank);
int grid_rank(const GridShape& shape, const GridCoord& coord);

class Grid {
 public:
  // Takes the three communicators of this rank; checks their sizes and ranks against shape and
  // coord (canzona::Error on a mismatch).
  Grid(const GridShape& shape, const GridCoord& coord, std::unique_ptr<Communicator> world,
       std::unique_ptr<Communicator> dp, std::unique_ptr<Communicator> tp);

  const GridShape& shape() const { return shape_; }
  const GridCoord& coord() const { return coord_; }

  Communicator& world() { return *world_; }
  Communicator& dp() { return *dp_; }
  Communicator& tp() { return *tp_; }

 private:
  GridShape shape_;
  GridCoord coord_;
  std::unique_ptr<Communicator> world_;
  std::unique_ptr<Communicator> dp_;
  std::unique_ptr<Communicator> tp_;
};

// Megatron's expert groups of a mixture-of-experts model (docs/cli.md, "Mixture of experts").
// Inside a pipeline stage the dp x tp ranks, numbered l = dp_index x tp + tp_index, are also an
// expert grid of expert DP x EP x expert TP with expert TP fastest: etp = l % etp,
// ep = (l / etp) % ep, edp = l / (etp x ep), edp = dp x tp / (ep x etp).
struct ExpertShape {
  int ep = 1;
  int etp = 1;
};
struct ExpertCoord {
  int edp = 0, ep = 0, etp = 0;
};
// Throws canzona::UsageError unless ep, etp >= 1 and ep x etp divides dp x tp.
void check_expert_shape(const GridShape& shape, const ExpertShape& expert);
ExpertCoord expert_coord(const GridShape& shape, const ExpertShape& expert, const GridCoord& coord);

// This rank's expert groups: `grid` is the expert grid of its EP rank's slice (world: the ranks of
// every stage with its ep index, in (pp, edp, etp) order; shape {edp, etp, pp}; its DP group the
// expert DP group, its TP group the expert TP group; coordinates {pp, edp, etp}); `ep` the EP
// group (same pp, edp and etp indices, ordered by ep index), over which tokens are dispatched.
struct ExpertGroups {
  ExpertShape shape;
  ExpertCoord coord;
  std::unique_ptr<Grid> grid;
  std::unique_ptr<Communicator> ep;
};

}  // namespace canzona::comm
