#include "canzona/comm/grid.h"

#include "canzona/common/error.h"

namespace canzona::comm {

Grid::Grid(const ParallelDims& dims, const GridCoord& coord, std::unique_ptr<Communicator> world,
           std::unique_ptr<Communicator> dp, std::unique_ptr<Communicator> tp,
           std::unique_ptr<Communicator> pp, std::unique_ptr<Communicator> embedding)
    : dims_(dims),
      coord_(coord),
      world_(std::move(world)),
      dp_(std::move(dp)),
      tp_(std::move(tp)),
      pp_(std::move(pp)),
      embedding_(std::move(embedding)) {
  dims_.check();
  CANZONA_CHECK(world_ && dp_ && tp_ && pp_, "Grid needs world, dp, tp and pp communicators");
  CANZONA_CHECK_EQ(std::int64_t{world_->size()}, dims_.world());
  CANZONA_CHECK_EQ(world_->rank(), dims_.rank(coord));
  CANZONA_CHECK_EQ(dp_->size(), dims_.dp);
  CANZONA_CHECK_EQ(dp_->rank(), coord.dp);
  CANZONA_CHECK_EQ(tp_->size(), dims_.tp);
  CANZONA_CHECK_EQ(tp_->rank(), coord.tp);
  CANZONA_CHECK_EQ(pp_->size(), dims_.pp);
  CANZONA_CHECK_EQ(pp_->rank(), coord.pp);
  const bool member = is_embedding_stage(coord.pp, dims_.pp);
  CANZONA_CHECK(member == (embedding_ != nullptr), "pipeline stage ", coord.pp, " of ", dims_.pp,
                member ? " needs" : " takes no", " embedding communicator");
  if (embedding_) {
    CANZONA_CHECK_EQ(embedding_->size(), dims_.pp == 1 ? 1 : 2);
    CANZONA_CHECK_EQ(embedding_->rank(), coord.pp == 0 ? 0 : 1);
  }
}

Communicator& Grid::embedding() {
  CANZONA_CHECK(embedding_ != nullptr, "the rank at pipeline stage ", coord_.pp, " of ", dims_.pp,
                " is in no embedding group (only the first and the last stage are)");
  return *embedding_;
}

}  // namespace canzona::comm
