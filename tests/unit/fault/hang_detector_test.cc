#include "fault/hang_detector.h"

#include "gtest/gtest.h"

namespace strata::fault {
namespace {

TEST(HangDetectorTest, StartUpUsesTheFirstStepDeadline) {
  FakeClock clock;
  HangOptions o;
  o.first_step_ms = 60'000;
  HangDetector d(o, clock, {0, 1});
  clock.Advance(59'000);
  EXPECT_FALSE(d.Check());
  clock.Advance(2'000);
  auto stall = d.Check();
  ASSERT_TRUE(stall);
  EXPECT_EQ(stall->ranks, (std::vector<int>{0, 1}));
  EXPECT_EQ(stall->last_step, -1);
}

TEST(HangDetectorTest, DeadlineIsLearnedFromStepTimesWithAFloor) {
  FakeClock clock;
  HangDetector d({}, clock, {0});
  EXPECT_EQ(d.DeadlineMs(), 300'000);
  for (int s = 0; s < 10; ++s) d.OnStep(0, s, 0.5);  // fast steps: floor
  EXPECT_EQ(d.DeadlineMs(), 10'000);
  for (int s = 10; s < 60; ++s) d.OnStep(0, s, 8.0);  // slow steps: 3 x 8 s
  EXPECT_EQ(d.DeadlineMs(), 24'000);
}

TEST(HangDetectorTest, NamesTheRanksWithoutProgress) {
  FakeClock clock;
  HangDetector d({}, clock, {0, 1, 2});
  for (int step = 0; step < 20; ++step) {
    clock.Advance(200);
    for (int r = 0; r < 3; ++r) d.OnStep(r, step, 0.2);
  }
  // Rank 1 stops; the others finish one more step, then wait in it.
  clock.Advance(200);
  d.OnStep(0, 20, 0.2);
  d.OnStep(2, 20, 0.2);
  clock.Advance(9'900);
  auto stall = d.Check();
  ASSERT_TRUE(stall);  // rank 1: 10.1 s without progress, deadline 10 s
  EXPECT_EQ(stall->ranks, (std::vector<int>{1}));
  EXPECT_EQ(stall->last_step, 19);
  EXPECT_EQ(stall->deadline_ms, 10'000);
  clock.Advance(300);
  stall = d.Check();
  ASSERT_TRUE(stall);
  EXPECT_EQ(stall->ranks, (std::vector<int>{0, 1, 2}));
  FaultEvent e = HangDetector::ToEvent(*stall);
  EXPECT_EQ(e.kind, EventKind::kHang);
  EXPECT_NE(e.evidence.find("ranks 0,1,2"), std::string::npos) << e.evidence;
}

TEST(HangDetectorTest, StaleAndUnknownReportsDoNotCountAsProgress) {
  FakeClock clock;
  HangDetector d({}, clock, {0});
  d.OnStep(0, 5, 0.1);
  clock.Advance(11'000);
  d.OnStep(0, 5, 0.1);  // a repeated report is not progress
  d.OnStep(9, 6, 0.1);  // not a watched rank
  EXPECT_TRUE(d.Check());
}

}  // namespace
}  // namespace strata::fault
