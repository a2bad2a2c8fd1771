// Job progress from the ranks' latest step reports: the slowest rank's
// step, the reported total, medians, and an ETA stretched by the measured
// ETTR.
#include "observe/progress.h"

#include "gtest/gtest.h"

namespace strata::observe {
namespace {

control::StepReport Step(int rank, int64_t step, double s, int64_t total) {
  control::StepReport r;
  r.set_rank(rank);
  r.set_step(step);
  r.set_step_seconds(s);
  r.set_tokens(1000);
  r.set_total_steps(total);
  return r;
}

TEST(Progress, SlowestRankTotalMediansAndEta) {
  control::JobInfo job;
  job.set_submit_unix_ms(0);
  *job.add_steps() = Step(0, 100, 0.5, 1000);
  *job.add_steps() = Step(1, 99, 0.5, 1000);
  *job.add_steps() = Step(2, 100, 2.0, 1000);  // one slow report
  // 99 steps x 0.5 s in 99 s of wall time: ETTR 50%.
  const Progress p = ComputeProgress(job, 99'000);
  EXPECT_EQ(p.step, 99);
  EXPECT_EQ(p.total, 1000);
  EXPECT_DOUBLE_EQ(p.percent, 9.9);
  EXPECT_DOUBLE_EQ(p.step_s, 0.5);
  EXPECT_DOUBLE_EQ(p.tokens_per_s, 2000);
  EXPECT_DOUBLE_EQ(p.ettr, 0.5);
  ASSERT_TRUE(p.eta_s.has_value());
  EXPECT_DOUBLE_EQ(*p.eta_s, 901 * 0.5 / 0.5);
  EXPECT_EQ(DescribeProgress(p),
            "step 99/1000 (9.9%), 2000 tokens/s, 0.500 s/step, ETA 15m01s "
            "(ETTR 50%)");
}

TEST(Progress, UnknownTotalAndNoSteps) {
  control::JobInfo job;
  EXPECT_EQ(DescribeProgress(ComputeProgress(job, 1000)),
            "no step reported yet");
  *job.add_steps() = Step(0, 7, 0.25, 0);
  const Progress p = ComputeProgress(job, 1'000'000);
  EXPECT_FALSE(p.eta_s.has_value());
  EXPECT_EQ(DescribeProgress(p),
            "step 7 (total unknown), 4000 tokens/s, 0.250 s/step");
}

TEST(Progress, MfuCheckpointAndRestarts) {
  control::JobInfo job;
  job.set_submit_unix_ms(0);
  job.set_restart_count(2);
  // The planner predicted 0.4 s/step at 50% MFU; the job runs at 0.5 s.
  job.mutable_plan()->set_mfu(0.5);
  job.mutable_plan()->set_step_time_s(0.4);
  control::StepReport a = Step(0, 40, 0.5, 100), b = Step(1, 40, 0.5, 100);
  a.set_checkpoint_step(30);
  b.set_checkpoint_step(30);
  *job.add_steps() = a;
  *job.add_steps() = b;
  const Progress p = ComputeProgress(job, 20'000);
  ASSERT_TRUE(p.mfu.has_value());
  EXPECT_DOUBLE_EQ(*p.mfu, 0.4);
  EXPECT_EQ(p.checkpoint_step, 30);
  EXPECT_EQ(DescribeProgress(p),
            "step 40/100 (40.0%), 2000 tokens/s, 0.500 s/step, MFU 40%, ETA "
            "30s (ETTR 100%), checkpoint step 30, 2 restarts");
  // Without a planned FLOP count there is no MFU.
  job.clear_plan();
  EXPECT_FALSE(ComputeProgress(job, 20'000).mfu.has_value());
}

TEST(Progress, Durations) {
  EXPECT_EQ(FormatDuration(35.4), "35s");
  EXPECT_EQ(FormatDuration(269), "4m29s");
  EXPECT_EQ(FormatDuration(3720), "1h02m");
  EXPECT_EQ(FormatDuration(-5), "0s");
}

}  // namespace
}  // namespace strata::observe
