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
  HangOptions o;
  o.window = 50;
  HangDetector d(o, clock, {0});
  EXPECT_EQ(d.DeadlineMs(), 300'000);
  for (int s = 0; s < 10; ++s) d.OnStep(0, s, 0.5);  // fast steps: floor
  EXPECT_EQ(d.DeadlineMs(), 3'000);
  for (int s = 10; s < 60; ++s) d.OnStep(0, s, 8.0);  // slow steps: 3 x 8 s
  EXPECT_EQ(d.DeadlineMs(), 24'000);
}

// A rank's first step carries its start-up (or its in-place re-formation):
// it stands in for the step time only until steady steps come, and never
// enters the tail.
TEST(HangDetectorTest, TheFirstStepStaysOutOfTheWindow) {
  FakeClock clock;
  HangOptions o;
  HangDetector d(o, clock, {0, 1});
  d.OnStep(0, 1, 4.0);
  EXPECT_EQ(d.DeadlineMs(), 12'000);  // 3 x the only time known
  d.OnStep(1, 1, 5.0);
  for (int s = 2; s < 12; ++s) {
    d.OnStep(0, s, 1.25);
    d.OnStep(1, s, 1.25);
  }
  EXPECT_EQ(d.DeadlineMs(), 3'750);  // 3 x 1.25 s, not 2 x 5 s
}

// Steps that are regularly slower (a checkpoint every 10 steps taking 4x)
// raise the deadline to twice the slowest one, though the median ignores
// them; once they leave the window the deadline falls back.
TEST(HangDetectorTest, RegularSlowStepsRaiseTheDeadlineThroughTheTail) {
  FakeClock clock;
  HangOptions o;
  o.window = 20;
  HangDetector d(o, clock, {0});
  for (int s = 1; s <= 20; ++s) d.OnStep(0, s, s % 10 == 0 ? 2.0 : 0.5);
  EXPECT_EQ(d.DeadlineMs(), 4'000);  // 2 x 2.0 s > 3 x 0.5 s, > floor
  for (int s = 21; s <= 40; ++s) d.OnStep(0, s, 0.5);
  EXPECT_EQ(d.DeadlineMs(), 3'000);
}

// A rank in a phase (evaluation, saving) has the phase's deadline, not the
// step one; the step clock restarts when the phase ends.
TEST(HangDetectorTest, APhaseHasItsOwnDeadline) {
  FakeClock clock;
  HangOptions o;
  o.phase_ms = 60'000;
  HangDetector d(o, clock, {0, 1});
  for (int s = 1; s <= 10; ++s) {
    clock.Advance(100);
    d.OnStep(0, s, 0.1);
    d.OnStep(1, s, 0.1);
  }
  d.OnPhaseBegin(0, "eval", 0);         // the default phase deadline
  d.OnPhaseBegin(1, "save", 20'000);    // its own
  clock.Advance(19'000);
  EXPECT_FALSE(d.Check());              // 19 s of work: no hang
  clock.Advance(2'000);
  auto stall = d.Check();
  ASSERT_TRUE(stall);                   // rank 1 overran its 20 s
  EXPECT_EQ(stall->ranks, (std::vector<int>{1}));
  EXPECT_EQ(stall->phase, "save");
  EXPECT_EQ(stall->deadline_ms, 20'000);
  EXPECT_NE(HangDetector::ToEvent(*stall).evidence.find("phase 'save'"),
            std::string::npos);
  d.OnPhaseEnd(1);                      // ends: the step clock restarts
  EXPECT_FALSE(d.Check());
  clock.Advance(3'100);
  stall = d.Check();
  ASSERT_TRUE(stall);                   // rank 1: 3.1 s without a step
  EXPECT_EQ(stall->ranks, (std::vector<int>{1}));
  EXPECT_EQ(stall->deadline_ms, 3'000);
  d.OnStep(0, 11, 0.1);                 // a step ends rank 0's phase too
  d.OnStep(1, 11, 0.1);
  EXPECT_FALSE(d.Check());
  clock.Advance(3'100);
  EXPECT_TRUE(d.Check());
}

// A rank that completed the run's last step is done: it waits for its
// peers to finish, which is not a hang.
TEST(HangDetectorTest, RanksPastTheLastStepAreDone) {
  FakeClock clock;
  HangDetector d({}, clock, {0, 1});
  d.SetLastStep(5);
  d.OnStep(0, 5, 0.1);
  d.OnStep(1, 4, 0.1);
  clock.Advance(10'000);
  auto stall = d.Check();
  ASSERT_TRUE(stall);
  EXPECT_EQ(stall->ranks, (std::vector<int>{1}));
}

TEST(HangDetectorTest, NamesTheRanksWithoutProgress) {
  FakeClock clock;
  HangOptions o;
  o.floor_ms = 10'000;
  HangDetector d(o, clock, {0, 1, 2});
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
