// What /metrics snapshots and launch orders copy of a big job: the record
// without its per-node and per-rank lists (JobSummary), the plan file
// without the placement lists (PlanFileJson), and the loop-step histogram's
// exposition.
#include "coordinator/jobs/job_summary.h"

#include <gtest/gtest.h>

#include "common/config.h"
#include "coordinator/jobs/attempt_plan.h"
#include "coordinator/metrics/metrics_render.h"
#include "coordinator/server/loop_stats.h"

namespace strata::coordinator {
namespace {

control::JobInfo PlacedJob() {
  control::JobInfo job;
  job.set_job_id("job-7");
  job.set_state(control::RUNNING);
  job.set_restart_count(2);
  job.set_owner("alice");
  job.mutable_spec()->set_name("big");
  job.mutable_spec()->mutable_launch()->add_command("/bin/true");
  Plan* plan = job.mutable_plan();
  plan->set_tp(2);
  plan->set_dp(2);
  plan->set_pp(1);
  plan->set_mfu(0.4);
  plan->mutable_placement()->set_order("tp-cp-dp-pp");
  plan->mutable_placement()->add_stages();
  for (int r = 0; r < 4; ++r) {
    plan->mutable_placement()->add_ranks()->set_rank(r);
    job.add_ranks()->set_rank(r);
  }
  plan->mutable_placement()->add_groups();
  for (int n = 0; n < 2; ++n) {
    job.add_nodes("w-node-" + std::to_string(n));
    job.add_node_info()->set_worker_id("w-node-" + std::to_string(n));
  }
  job.add_evicted_nodes("node-9");
  (*job.mutable_node_speed())["node-1"] = 0.5;
  return job;
}

TEST(JobSummaryTest, DropsThePerNodeAndPerRankListsOnly) {
  const control::JobInfo job = PlacedJob();
  const control::JobInfo s = JobSummary(job);
  EXPECT_EQ(s.nodes_size(), 0);
  EXPECT_EQ(s.node_info_size(), 0);
  EXPECT_EQ(s.ranks_size(), 0);
  EXPECT_EQ(s.plan().placement().ranks_size(), 0);
  EXPECT_EQ(s.plan().placement().groups_size(), 0);
  // Everything else is as it was.
  control::JobInfo expected = job;
  expected.clear_nodes();
  expected.clear_node_info();
  expected.clear_ranks();
  expected.mutable_plan()->mutable_placement()->clear_ranks();
  expected.mutable_plan()->mutable_placement()->clear_groups();
  EXPECT_EQ(s.SerializeAsString(), expected.SerializeAsString());
}

TEST(JobSummaryTest, PendingJobWithoutPlanStaysWithoutPlan) {
  control::JobInfo job;
  job.set_job_id("job-1");
  job.set_state(control::PENDING);
  EXPECT_FALSE(JobSummary(job).has_plan());
  EXPECT_EQ(JobSummary(job).job_id(), "job-1");
}

// The same file as copying the plan and clearing the two lists (what
// PlanFileJson did before it stopped copying them).
TEST(JobSummaryTest, PlanFileHasNoPlacementLists) {
  for (const Plan& plan : {PlacedJob().plan(), Plan()}) {
    Plan cleared = plan;
    cleared.mutable_placement()->clear_ranks();
    cleared.mutable_placement()->clear_groups();
    EXPECT_EQ(PlanFileJson(plan), MessageToJson(cleared));
  }
  const std::string json = PlanFileJson(PlacedJob().plan());
  EXPECT_NE(json.find("tp-cp-dp-pp"), std::string::npos) << json;
  EXPECT_NE(json.find("\"ranks\":[]"), std::string::npos) << json;
  EXPECT_NE(json.find("\"groups\":[]"), std::string::npos) << json;
}

TEST(JobSummaryTest, LoopStepsAreExportedWithTheGoalAsABound) {
  LoopStats stats;
  stats.Add(0.003, 0.002);
  stats.Add(0.080, 0.060);  // over 50 ms
  MetricsInput in;
  in.loop_steps = {.buckets = LoopStats::Buckets(),
                   .wall = stats.wall(),
                   .cpu = stats.cpu()};
  const std::string text = RenderMetrics(in);
  EXPECT_NE(text.find("strata_coordinator_loop_step_seconds_bucket{clock="
                      "\"wall\",le=\"0.05\"} 1\n"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("strata_coordinator_loop_step_seconds_count{clock="
                      "\"cpu\"} 2\n"),
            std::string::npos)
      << text;
  EXPECT_DOUBLE_EQ(stats.max_wall_s(), 0.080);
}

}  // namespace
}  // namespace strata::coordinator
