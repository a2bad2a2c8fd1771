// JobMonitor on synthetic step reports with a fake clock: the rank that
// computes slowly is flagged (right rank, node, section), the ranks that
// wait for it are not, and a stall is reported once.
#include "coordinator/fault/job_monitor.h"

#include <cmath>
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


// A ring across three nodes, one rank each: every step rank r sends 20 MB
// to rank r+1. Links into and out of node-2 run at `slow_rate` once
// `slow_from` is reached, the others at 125 MB/s.
TEST(JobMonitorTest, NamesTheSlowLinkFromStepReports) {
  FakeClock clock;
  JobMonitor m(clock, fault::Resolve(FaultPolicy()),
               {{0, "node-0", 0}, {1, "node-1", 0}, {2, "node-2", 0}});
  std::vector<fault::FaultEvent> found;
  int64_t first = -1;
  for (int64_t step = 1; step <= 80; ++step) {
    for (int r = 0; r < 3; ++r) {
      const int peer = (r + 1) % 3;
      const bool slow = step > 40 && (r == 2 || peer == 2);
      control::StepReport s;
      s.set_rank(r);
      s.set_step(step);
      s.set_step_seconds(0.5);
      control::LinkSample* l = s.add_links();
      l->set_peer_rank(peer);
      l->set_bytes(20000000);
      l->set_busy_seconds(20e6 / (slow ? 31e6 : 125e6));
      for (auto& e : m.OnStep(s)) {
        if (e.kind != fault::EventKind::kSlowLink) continue;
        if (first < 0) first = step;
        found.push_back(e);
      }
    }
    clock.Advance(500);
  }
  ASSERT_EQ(found.size(), 2u);  // node-1 -> node-2 and node-2 -> node-0, once
  for (const auto& e : found) {
    EXPECT_TRUE(e.node == "node-2" || e.peer_node == "node-2") << e.evidence;
    EXPECT_GE(e.slowdown, 2);  // the threshold, crossed as the window fills
    EXPECT_NE(e.evidence.find("include node-2"), std::string::npos)
        << e.evidence;
  }
  // The long window (all 40 + k samples so far) agrees once a third of it
  // is 4x slow: k >= 20 (docs/fault.md "Slow links").
  EXPECT_LE(first - 40, 22) << "found at step " << first;
  EXPECT_EQ(m.SlowLinkSuspect(), "node-2");
  const control::DiagnoseReply d = m.Diagnose();
  ASSERT_EQ(d.links_size(), 3);
  int slow = 0;
  for (const auto& l : d.links()) slow += l.slow();
  EXPECT_EQ(slow, 2);
}

TEST(JobMonitorTest, EvenLinksAreNeverSlow) {
  FakeClock clock;
  JobMonitor m(clock, fault::Resolve(FaultPolicy()),
               {{0, "node-0", 0}, {1, "node-1", 0}, {2, "node-2", 0}});
  std::mt19937 rng(3);
  std::normal_distribution<double> noise(1.0, 0.3);
  for (int64_t step = 1; step <= 2000; ++step) {
    for (int r = 0; r < 3; ++r) {
      control::StepReport s;
      s.set_rank(r);
      s.set_step(step);
      s.set_step_seconds(0.5);
      control::LinkSample* l = s.add_links();
      l->set_peer_rank((r + 1) % 3);
      l->set_bytes(20000000);
      // 30% noise, read in 4 ms ticks.
      const double busy = 0.16 * std::max(0.3, noise(rng));
      l->set_busy_seconds(std::floor(busy / 0.004) * 0.004);
      for (auto& e : m.OnStep(s)) {
        EXPECT_NE(e.kind, fault::EventKind::kSlowLink) << e.evidence;
      }
    }
    clock.Advance(500);
  }
}

// Plan vs measured on a two-stage pipeline (ranks 0-1 stage 0, 2-3 stage 1):
// each stage computes `measured[stage]` per step with 5% noise.
std::vector<fault::FaultEvent> RunStages(JobMonitor& m, FakeClock& clock,
                                         std::vector<double> measured,
                                         int steps) {
  std::mt19937 rng(5);
  std::normal_distribution<double> noise(1.0, 0.05);
  std::vector<fault::FaultEvent> found;
  for (int64_t step = 1; step <= steps; ++step) {
    for (int r = 0; r < 4; ++r) {
      control::StepReport s;
      s.set_rank(r);
      s.set_step(step);
      const double compute = measured[r / 2] * noise(rng);
      s.set_step_seconds(compute + 0.05);
      (*s.mutable_section_seconds())["wait"] = 0.05;
      for (auto& e : m.OnStep(s)) found.push_back(e);
    }
    clock.Advance(400);
  }
  return found;
}

std::vector<JobMonitor::RankMeta> TwoStages() {
  return {{0, "node-0", 0}, {1, "node-0", 0}, {2, "node-1", 1},
          {3, "node-1", 1}};
}

TEST(JobMonitorTest, StageSlowerThanItsPredictionIsAPlanMismatch) {
  FakeClock clock;
  JobMonitor m(clock, fault::Resolve(FaultPolicy()), TwoStages(),
               {0.15, 0.15});
  // The cost model is 2x off everywhere (calibration, not a fault), and
  // stage 1 is 1.4x slower than that on top.
  auto found = RunStages(m, clock, {0.3, 0.42}, 100);
  ASSERT_EQ(found.size(), 1u);
  EXPECT_EQ(found[0].kind, fault::EventKind::kPlanMismatch);
  EXPECT_EQ(found[0].stage, 1);
  EXPECT_EQ(found[0].rank, -1);
  const control::DiagnoseReply d = m.Diagnose();
  ASSERT_EQ(d.stages_size(), 2);
  EXPECT_NEAR(d.stages(1).measured_s() / d.stages(0).measured_s(), 1.4, 0.1);
  EXPECT_GT(d.stages(1).calibrated_ratio(), 1.15);
}

TEST(JobMonitorTest, StagesUnevenAsPredictedIsAnUnbalancedPlan) {
  FakeClock clock;
  JobMonitor m(clock, fault::Resolve(FaultPolicy()), TwoStages(), {0.1, 0.15});
  auto found = RunStages(m, clock, {0.2, 0.3}, 100);
  ASSERT_EQ(found.size(), 1u);
  EXPECT_EQ(found[0].kind, fault::EventKind::kUnbalancedPlan);
  EXPECT_EQ(found[0].stage, 1);
  EXPECT_NEAR(m.Diagnose().plan_calibration(), 2.0, 0.15);
}

TEST(JobMonitorTest, PlanChecksHandOutTheirCalibrationOnce) {
  FakeClock clock;
  JobMonitor m(clock, fault::Resolve(FaultPolicy()), TwoStages(), {0.1, 0.1});
  EXPECT_FALSE(m.TakePlanCalibration().has_value());
  RunStages(m, clock, {0.25, 0.25}, 100);
  auto ratio = m.TakePlanCalibration();
  ASSERT_TRUE(ratio.has_value());
  EXPECT_NEAR(*ratio, 2.5, 0.2);
  EXPECT_FALSE(m.TakePlanCalibration().has_value());
  JobMonitor unplanned(clock, fault::Resolve(FaultPolicy()), TwoStages());
  RunStages(unplanned, clock, {0.25, 0.25}, 100);
  EXPECT_FALSE(unplanned.TakePlanCalibration().has_value());
}

TEST(JobMonitorTest, BalancedOnPlanOrUnpredictedStagesReportNothing) {
  FakeClock clock;
  JobMonitor planned(clock, fault::Resolve(FaultPolicy()), TwoStages(),
                     {0.1, 0.1});
  EXPECT_TRUE(RunStages(planned, clock, {0.3, 0.3}, 200).empty());
  EXPECT_EQ(planned.Diagnose().stages_size(), 2);
  JobMonitor unplanned(clock, fault::Resolve(FaultPolicy()), TwoStages());
  EXPECT_TRUE(RunStages(unplanned, clock, {0.2, 0.3}, 100).empty());
  EXPECT_EQ(unplanned.Diagnose().stages_size(), 0);
}

}  // namespace
}  // namespace strata::coordinator

