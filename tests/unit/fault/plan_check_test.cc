#include "fault/plan_check.h"

#include "gtest/gtest.h"

namespace strata::fault {
namespace {

TEST(PlanCheckTest, UniformlyOffModelIsCalibrationNotAFault) {
  PlanCheck c = CheckPlan({{0, 1.0, 1.8}, {1, 1.0, 1.85}, {2, 2.0, 3.7}});
  EXPECT_NEAR(c.calibration, 1.85, 1e-9);
  for (const FaultEvent& e : c.events) {
    EXPECT_NE(e.kind, EventKind::kPlanMismatch) << e.evidence;
  }
}

TEST(PlanCheckTest, OneStageSlowerThanItsPredictionIsDegraded) {
  PlanCheck c = CheckPlan({{0, 1.0, 1.0}, {1, 1.0, 1.4}, {2, 1.0, 1.02}});
  ASSERT_EQ(c.events.size(), 1u);
  EXPECT_EQ(c.events[0].kind, EventKind::kPlanMismatch);
  EXPECT_EQ(c.events[0].stage, 1);
  // Against the median of the other stages, 1.0 and 1.02.
  EXPECT_NEAR(c.events[0].slowdown, 1.4 / 1.01, 1e-9);
}

TEST(PlanCheckTest, TwoStagesCompareWithEachOther) {
  // With two stages a median over both would be their mean (1.45) and show
  // the slow stage at only 1.31x.
  PlanCheck c = CheckPlan({{0, 1.0, 1.0}, {1, 1.0, 1.9}});
  ASSERT_EQ(c.events.size(), 1u);
  EXPECT_EQ(c.events[0].stage, 1);
  EXPECT_NEAR(c.events[0].slowdown, 1.9, 1e-9);
}

TEST(PlanCheckTest, UnevenStagesAsPredictedIsAnUnbalancedPlan) {
  PlanCheck c = CheckPlan({{0, 1.0, 1.0}, {1, 1.5, 1.52}});
  ASSERT_EQ(c.events.size(), 1u);
  EXPECT_EQ(c.events[0].kind, EventKind::kUnbalancedPlan);
  EXPECT_EQ(c.events[0].stage, 1);
}

TEST(PlanCheckTest, BalancedAndOnPlanHasNoEvent) {
  EXPECT_TRUE(CheckPlan({{0, 1.0, 1.01}, {1, 1.0, 0.99}}).events.empty());
  EXPECT_TRUE(CheckPlan({}).events.empty());
}

}  // namespace
}  // namespace strata::fault
