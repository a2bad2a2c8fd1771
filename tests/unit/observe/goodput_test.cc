#include "observe/goodput.h"

#include "gtest/gtest.h"

namespace strata::observe {
namespace {

constexpr int64_t kT = 1'700'000'000'000;  // submit, ms

double Sum(const Goodput& g) {
  return g.productive_s + g.startup_s + g.restart_s + g.hang_s +
         g.recompute_s + g.checkpoint_s + g.straggler_s;
}

TEST(GoodputTest, StartupThenProductiveSteps) {
  GoodputLedger l(kT);
  // Steps of 1 s; the first ends 10 s after the submit.
  for (int s = 1; s <= 5; ++s) l.OnStep(0, s, kT + 9000 + s * 1000, 1.0, 0);
  const Goodput g = l.At(kT + 14000);
  EXPECT_DOUBLE_EQ(g.wall_s, 14);
  EXPECT_DOUBLE_EQ(g.startup_s, 9);
  EXPECT_DOUBLE_EQ(g.productive_s, 5);
  EXPECT_DOUBLE_EQ(Sum(g), g.wall_s);
  // Half a second into step 6: counted as productive until told otherwise.
  EXPECT_DOUBLE_EQ(l.At(kT + 14500).productive_s, 5.5);
}

TEST(GoodputTest, TimeBetweenStepsIsTraining) {
  GoodputLedger l(kT);
  // Steps of 0.8 s reported 1 s apart (logging, data, the loop itself).
  for (int s = 1; s <= 4; ++s) l.OnStep(0, s, kT + 200 + s * 1000, 0.8, 0);
  const Goodput g = l.At(kT + 4200);
  EXPECT_DOUBLE_EQ(g.startup_s, 0.4);
  EXPECT_DOUBLE_EQ(g.productive_s, 0.8 + 3 * 1.0);
  EXPECT_DOUBLE_EQ(g.restart_s, 0);
}

TEST(GoodputTest, FailureRestartAndRecompute) {
  GoodputLedger l(kT);
  for (int s = 1; s <= 10; ++s) l.OnStep(0, s, kT + s * 1000, 1.0, 0);
  // Step 11 half done when a rank dies; the next attempt resumes from the
  // checkpoint of step 6 and its first step ends 5 s after the failure.
  l.OnAttemptEnd(kT + 10'500);
  l.OnStep(0, 11, kT + 10'900, 1.0, 0);  // late report of attempt 0: ignored
  for (int s = 7; s <= 12; ++s) l.OnStep(1, s, kT + 15'500 + (s - 7) * 1000, 1.0, 0);
  const Goodput g = l.At(kT + 20'500);
  EXPECT_DOUBLE_EQ(g.startup_s, 0);
  EXPECT_DOUBLE_EQ(g.restart_s, 0.5 + 4.0);  // the lost half step, the gap
  EXPECT_DOUBLE_EQ(g.recompute_s, 4);        // steps 7-10 again
  EXPECT_DOUBLE_EQ(g.productive_s, 10 + 2);  // 1-10, then 11 and 12
  EXPECT_DOUBLE_EQ(Sum(g), g.wall_s);
}

TEST(GoodputTest, HangUntilTheAttemptEnds) {
  GoodputLedger l(kT);
  for (int s = 1; s <= 3; ++s) l.OnStep(0, s, kT + s * 1000, 1.0, 0);
  l.OnHang();  // found 12 s after the last step, stopped 2 s later
  l.OnAttemptEnd(kT + 17'000);
  const Goodput g = l.At(kT + 18'000);
  EXPECT_DOUBLE_EQ(g.hang_s, 14);
  EXPECT_DOUBLE_EQ(g.restart_s, 1);  // waiting for the next attempt
  EXPECT_DOUBLE_EQ(Sum(g), g.wall_s);
}

TEST(GoodputTest, CheckpointAndStraggler) {
  GoodputLedger l(kT);
  for (int s = 1; s <= 20; ++s) {
    l.OnStep(0, s, kT + s * 1000, 1.0, s % 10 == 0 ? 0.25 : 0);
  }
  l.OnStraggler();  // then steps take 1.5 s
  int64_t t = kT + 20'000;
  for (int s = 21; s <= 24; ++s) l.OnStep(0, s, t += 1500, 1.5, 0);
  const Goodput g = l.At(t);
  EXPECT_DOUBLE_EQ(g.checkpoint_s, 0.5);
  EXPECT_DOUBLE_EQ(g.straggler_s, 4 * 0.5);
  EXPECT_DOUBLE_EQ(g.productive_s, 20 - 0.5 + 4 * 1.0);
  EXPECT_DOUBLE_EQ(Sum(g), g.wall_s);
}

TEST(GoodputTest, EndedJobStopsAccruing) {
  GoodputLedger l(kT);
  l.OnStep(0, 1, kT + 2000, 1.0, 0);
  l.OnJobEnd(kT + 2500);  // the ranks exit after their last step
  const Goodput g = l.At(kT + 60'000);
  EXPECT_DOUBLE_EQ(g.wall_s, 2.5);
  EXPECT_DOUBLE_EQ(g.productive_s, 1.5);
  EXPECT_DOUBLE_EQ(Sum(g), g.wall_s);
  EXPECT_EQ(DescribeGoodput(g), "60.0% of 3s; lost: startup 1.0s");
}

TEST(GoodputTest, FailureBeforeAnyStepIsStartupThenRestart) {
  GoodputLedger l(kT);
  l.OnAttemptEnd(kT + 3000);
  l.OnAttemptEnd(kT + 5000);  // attempt 1 failed too
  l.OnStep(2, 1, kT + 8000, 1.0, 0);
  const Goodput g = l.At(kT + 8000);
  EXPECT_DOUBLE_EQ(g.startup_s, 3);
  EXPECT_DOUBLE_EQ(g.restart_s, 4);
  EXPECT_DOUBLE_EQ(g.productive_s, 1);
}

// A restored ledger goes on exactly as the saved one would have: a
// failure, a resume with recomputed steps and a straggler after the save.
TEST(GoodputTest, SaveAndRestoreContinueTheSameAccounting) {
  GoodputLedger a(kT);
  for (int s = 1; s <= 30; ++s) a.OnStep(0, s, kT + s * 1000, 1.0, 0.1);
  a.OnAttemptEnd(kT + 30500);
  for (int s = 25; s <= 32; ++s) a.OnStep(1, s, kT + 32000 + s * 1000, 1.0, 0);
  auto b = GoodputLedger::Restore(a.Save());
  ASSERT_TRUE(b.ok()) << b.status();
  for (GoodputLedger* l : {&a, &*b}) {
    l->OnStraggler();
    for (int s = 33; s <= 40; ++s) l->OnStep(1, s, kT + 65000 + s * 1500, 1.5, 0);
    l->OnJobEnd(kT + 126000);
  }
  const Goodput ga = a.At(kT + 130000), gb = b->At(kT + 130000);
  EXPECT_GT(ga.recompute_s, 0);
  EXPECT_GT(ga.straggler_s, 0);
  EXPECT_DOUBLE_EQ(gb.wall_s, ga.wall_s);
  EXPECT_DOUBLE_EQ(gb.productive_s, ga.productive_s);
  EXPECT_DOUBLE_EQ(gb.restart_s, ga.restart_s);
  EXPECT_DOUBLE_EQ(gb.recompute_s, ga.recompute_s);
  EXPECT_DOUBLE_EQ(gb.checkpoint_s, ga.checkpoint_s);
  EXPECT_DOUBLE_EQ(gb.straggler_s, ga.straggler_s);
  EXPECT_DOUBLE_EQ(Sum(gb), gb.wall_s);
}

TEST(GoodputTest, RestoreRefusesStatesSaveCannotWrite) {
  control::GoodputState p = GoodputLedger(kT).Save();
  p.set_phase(7);
  EXPECT_EQ(GoodputLedger::Restore(p).status().code(),
            absl::StatusCode::kInvalidArgument);
  p = GoodputLedger(kT).Save();
  p.set_mark_ms(kT - 1);
  EXPECT_EQ(GoodputLedger::Restore(p).status().code(),
            absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace strata::observe
