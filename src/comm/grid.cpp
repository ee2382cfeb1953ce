#include "canzona/comm/grid.h"

#include <cstdint>

#include "canzona/common/error.h"

namespace canzona::comm {

void check_grid_shape(const GridShape& shape, int world_size) {
  CANZONA_REQUIRE(shape.dp >= 1 && shape.tp >= 1 && shape.pp >= 1, "grid degrees must be >= 1: dp ",
                  shape.dp, " x tp ", shape.tp, " x pp ", shape.pp);
  const std::int64_t product = std::int64_t{shape.dp} * shape.tp * shape.pp;
  CANZONA_REQUIRE(product == world_size, "world size ", world_size, " != dp ", shape.dp, " x tp ",
                  shape.tp, " x pp ", shape.pp);
}

GridCoord grid_coord(const GridShape& shape, int world_rank) {
  CANZONA_CHECK(world_rank >= 0 && world_rank < shape.dp * shape.tp * shape.pp, "world rank ",
                world_rank);
  GridCoord coord;
  coord.tp = world_rank % shape.tp;
  coord.dp = (world_rank / shape.tp) % shape.dp;
  coord.pp = world_rank / (shape.tp * shape.dp);
  return coord;
}

int grid_rank(const GridShape& shape, const GridCoord& coord) {
  return (coord.pp * shape.dp + coord.dp) * shape.tp + coord.tp;
}

void check_expert_shape(const GridShape& shape, const ExpertShape& expert) {
  CANZONA_REQUIRE(expert.ep >= 1 && expert.etp >= 1, "--ep and --etp must be >= 1 (got --ep ",
                  expert.ep, ", --etp ", expert.etp, ")");
  const std::int64_t ranks = std::int64_t{shape.dp} * shape.tp;
  const std::int64_t group = std::int64_t{expert.ep} * expert.etp;
  CANZONA_REQUIRE(ranks % group == 0, "--ep ", expert.ep, " x --etp ", expert.etp,
                  " does not divide --dp ", shape.dp, " x --tp ", shape.tp);
}

ExpertCoord expert_coord(const GridShape& shape, const ExpertShape& expert,
                         const GridCoord& coord) {
  const int l = coord.dp * shape.tp + coord.tp;
  return {l / (expert.etp * expert.ep), (l / expert.etp) % expert.ep, l % expert.etp};
}

Grid::Grid(const GridShape& shape, const GridCoord& coord, std::unique_ptr<Communicator> world,
           std::unique_ptr<Communicator> dp, std::unique_ptr<Communicator> tp)
    : shape_(shape),
      coord_(coord),
      world_(std::move(world)),
      dp_(std::move(dp)),
      tp_(std::move(tp)) {
  CANZONA_CHECK(world_ && dp_ && tp_, "Grid needs three communicators");
  CANZONA_CHECK_EQ(world_->size(), shape.dp * shape.tp * shape.pp);
  CANZONA_CHECK_EQ(world_->rank(), grid_rank(shape, coord));
  CANZONA_CHECK_EQ(dp_->size(), shape.dp);
  CANZONA_CHECK_EQ(dp_->rank(), coord.dp);
  CANZONA_CHECK_EQ(tp_->size(), shape.tp);
  CANZONA_CHECK_EQ(tp_->rank(), coord.tp);
}

}  // namespace canzona::comm
