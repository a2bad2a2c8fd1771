// JobMonitor on synthetic step reports with a fake clock: the rank that
// computes slowly is flagged (right rank, node, section), the ranks that
// wait for it are not, and a stall is reported once.
#include "coordinator/fault/job_monitor.h"

#include <random>

#include "gtest/gtest.h"

namespace strata::coordinator {
namespace {

std::vector<JobMonitor::RankMeta> FourRanks() {
  return {{0, "node-0", 0}, {1, "node-0", 0}, {2, "node-1", 0},
          {3, "node-1", 0}};
}

// One step of a data-parallel job (0.3 s of compute: strata-train `small`
// on 4 ranks here, the job the step-count goals are stated for): every rank
// computes `work` (rank
// `slow` `factor` times longer) and then waits in the gradient all-reduce
// until the slowest arrives, so every step takes the same wall time.
std::vector<control::StepReport> Step(int64_t step, int slow, double factor,
                                      std::mt19937& rng) {
  std::normal_distribution<double> noise(1.0, 0.05);
  std::vector<double> compute(4);
  for (int r = 0; r < 4; ++r) compute[r] = 0.3 * noise(rng) * (r == slow ? factor : 1);
  const double longest = *std::max_element(compute.begin(), compute.end());
  std::vector<control::StepReport> out;
  for (int r = 0; r < 4; ++r) {
    control::StepReport s;
    s.set_rank(r);
    s.set_step(step);
    const double wait = longest - compute[r];
    const double comm = 0.01;
    s.set_step_seconds(longest + comm);
    (*s.mutable_section_seconds())["forward"] = compute[r] * 0.3 + wait * 0.5;
    (*s.mutable_section_seconds())["backward"] = compute[r] * 0.7 + wait * 0.5;
    (*s.mutable_section_seconds())["wait"] = wait;
    (*s.mutable_section_seconds())["comm"] = comm;
    out.push_back(s);
  }
  return out;
}

TEST(JobMonitorTest, FlagsTheSlowRankNotItsVictims) {
  FakeClock clock;
  JobMonitor m(clock, fault::Resolve(FaultPolicy()), FourRanks());
  std::mt19937 rng(7);
  std::vector<fault::FaultEvent> found;
  int64_t first = -1;
  for (int64_t step = 1; step <= 200; ++step) {
    const int slow = step > 50 ? 2 : -1;
    for (const auto& r : Step(step, slow, 1.3, rng)) {
      for (auto& e : m.OnStep(r)) {
        if (first < 0) first = step;
        found.push_back(e);
      }
    }
    clock.Advance(310);
  }
  ASSERT_EQ(found.size(), 1u);
  EXPECT_EQ(found[0].rank, 2);
  EXPECT_EQ(found[0].node, "node-1");
  EXPECT_GT(found[0].slowdown, 1.15);
  EXPECT_LE(first - 50, 30) << "flagged at step " << first;
  const control::DiagnoseReply d = m.Diagnose();
  ASSERT_EQ(d.ranks_size(), 4);
  EXPECT_TRUE(d.ranks(2).flagged());
  EXPECT_FALSE(d.ranks(0).flagged());
  EXPECT_GT(d.ranks(2).late_s(), d.ranks(0).late_s());
  EXPECT_LT(d.ranks(2).wait_s(), d.ranks(0).wait_s());
}

TEST(JobMonitorTest, CleanStepsFlagNobody) {
  FakeClock clock;
  JobMonitor m(clock, fault::Resolve(FaultPolicy()), FourRanks());
  std::mt19937 rng(11);
  for (int64_t step = 1; step <= 2000; ++step) {
    for (const auto& r : Step(step, -1, 1, rng)) {
      EXPECT_TRUE(m.OnStep(r).empty()) << "step " << step;
    }
    clock.Advance(310);
  }
  EXPECT_FALSE(m.CheckHang().has_value());
}

TEST(JobMonitorTest, AStallIsReportedOnceUntilProgress) {
  FakeClock clock;
  FaultPolicy p;
  p.set_hang_floor_s(5);
  JobMonitor m(clock, fault::Resolve(p), FourRanks());
  std::mt19937 rng(3);
  for (int64_t step = 1; step <= 20; ++step) {
    for (const auto& r : Step(step, -1, 1, rng)) m.OnStep(r);
    clock.Advance(310);
  }
  clock.Advance(4000);
  EXPECT_FALSE(m.CheckHang().has_value());
  clock.Advance(1100);
  auto stall = m.CheckHang();
  ASSERT_TRUE(stall.has_value());
  EXPECT_EQ(stall->ranks.size(), 4u);
  EXPECT_FALSE(m.CheckHang().has_value());  // once
  for (const auto& r : Step(21, -1, 1, rng)) m.OnStep(r);
  clock.Advance(6000);
  EXPECT_TRUE(m.CheckHang().has_value());  // a new stall after progress
}

TEST(JobMonitorTest, ReportsOfUnknownRanksAreIgnored) {
  FakeClock clock;
  JobMonitor m(clock, fault::Resolve(FaultPolicy()), FourRanks());
  control::StepReport r;
  r.set_rank(99);
  r.set_step(1);
  r.set_step_seconds(1);
  EXPECT_TRUE(m.OnStep(r).empty());
  EXPECT_EQ(m.Diagnose().ranks_size(), 4);
}

}  // namespace
}  // namespace strata::coordinator
