// The 1F1B order against sequences written out by hand from Megatron-LM's
// forward_backward_pipelining_without_interleaving: num_warmup = min(p - s - 1, m) forwards,
// then (forward, backward) pairs, then the remaining backwards.
#include "canzona/plan/pipeline_schedule.h"

#include <gtest/gtest.h>

#include <string>

#include "canzona/common/error.h"

namespace canzona::plan {
namespace {

// "F0 F1 B0 ..." of a schedule.
std::string text(const std::vector<PipelineOp>& ops) {
  std::string out;
  for (const PipelineOp& op : ops) {
    if (!out.empty()) out += ' ';
    out += op.kind == PipelineOp::Kind::kForward ? 'F' : 'B';
    out += std::to_string(op.micro);
  }
  return out;
}

TEST(OneFOneB, FourStagesSixMicroBatches) {
  EXPECT_EQ(text(one_f_one_b(4, 0, 6)), "F0 F1 F2 F3 B0 F4 B1 F5 B2 B3 B4 B5");
  EXPECT_EQ(text(one_f_one_b(4, 1, 6)), "F0 F1 F2 B0 F3 B1 F4 B2 F5 B3 B4 B5");
  EXPECT_EQ(text(one_f_one_b(4, 2, 6)), "F0 F1 B0 F2 B1 F3 B2 F4 B3 F5 B4 B5");
  EXPECT_EQ(text(one_f_one_b(4, 3, 6)), "F0 B0 F1 B1 F2 B2 F3 B3 F4 B4 F5 B5");
}

TEST(OneFOneB, FewerMicroBatchesThanStagesIsAllForwardsThenAllBackwards) {
  EXPECT_EQ(text(one_f_one_b(4, 0, 2)), "F0 F1 B0 B1");
  EXPECT_EQ(text(one_f_one_b(4, 1, 2)), "F0 F1 B0 B1");
  EXPECT_EQ(text(one_f_one_b(4, 2, 2)), "F0 F1 B0 B1");
  EXPECT_EQ(text(one_f_one_b(4, 3, 2)), "F0 B0 F1 B1");
  EXPECT_EQ(text(one_f_one_b(2, 0, 1)), "F0 B0");
  EXPECT_EQ(warmup_forwards(4, 0, 2), 2);
  EXPECT_EQ(warmup_forwards(4, 0, 6), 3);
  EXPECT_EQ(warmup_forwards(4, 3, 6), 0);
}

TEST(OneFOneB, OneStageIsForwardBackwardPerMicroBatch) {
  EXPECT_EQ(text(one_f_one_b(1, 0, 3)), "F0 B0 F1 B1 F2 B2");
}

TEST(OneFOneB, RefusesArgumentsOutOfRange) {
  EXPECT_THROW(one_f_one_b(2, 2, 4), Error);
  EXPECT_THROW(one_f_one_b(2, -1, 4), Error);
  EXPECT_THROW(one_f_one_b(0, 0, 4), Error);
  EXPECT_THROW(one_f_one_b(2, 0, 0), Error);
}

}  // namespace
}  // namespace canzona::plan
