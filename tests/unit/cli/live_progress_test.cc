// Which output lines the live progress line replaces on a terminal.
#include "cli/live_progress.h"

#include "gtest/gtest.h"

namespace strata::cli {
namespace {

TEST(LiveProgress, StepLinesAreTheTrainersPerStepLines) {
  EXPECT_TRUE(LiveProgress::IsStepLine(
      "[rank 0] step=12 loss=3.1 tokens_per_s=1000.0 step_s=0.3"));
  EXPECT_TRUE(LiveProgress::IsStepLine("step=1 loss=nan"));
  EXPECT_TRUE(LiveProgress::IsStepLine("epoch 1 step=7 lr=0.1 loss=2"));
  EXPECT_FALSE(LiveProgress::IsStepLine("[rank 0] resumed step=30 tp=1"));
  EXPECT_FALSE(LiveProgress::IsStepLine("[rank 0] done steps=60 loss=2"));
  EXPECT_FALSE(LiveProgress::IsStepLine("substep=3 loss=1"));
  EXPECT_FALSE(LiveProgress::IsStepLine("warning: no step here"));
}

}  // namespace
}  // namespace strata::cli
