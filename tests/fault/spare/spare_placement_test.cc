// The pure parts of hot spares (coordinator/jobs/job_spares.h,
// observe/spare_pool.h): which previous nodes a restart keeps, waits for or
// replaces; a spare that cannot run the plan's ranks per node is skipped
// (re-plan instead); the reservation drops dead and taken workers; the idle
// pool splits idle workers into free and reserved.
#include <gtest/gtest.h>

#include "coordinator/jobs/job_spares.h"
#include "observe/spare_pool.h"

namespace strata::coordinator {
namespace {

control::WorkerInfo Worker(const std::string& node, bool alive = true,
                           int gpus = 0) {
  control::WorkerInfo w;
  w.set_worker_id("w-" + node);
  w.set_node_name(node);
  w.set_alive(alive);
  w.mutable_probe()->set_gpus(gpus);
  return w;
}

// A job of attempt 1 whose attempt 0 ran on `nodes`, reserving `spares`.
control::JobInfo Restarting(const std::vector<std::string>& nodes,
                            const std::vector<std::string>& spares) {
  control::JobInfo job;
  job.set_job_id("job-1");
  job.set_attempt(1);
  job.set_state(control::PENDING);
  job.mutable_spec()->mutable_launch()->set_spares(
      static_cast<int>(spares.size()));
  job.mutable_plan()->set_dp(static_cast<int>(nodes.size()));
  for (const auto& n : nodes) {
    *job.add_node_info() = Worker(n);
    job.add_nodes("w-" + n);
  }
  for (const auto& s : spares) job.add_spare_workers("w-" + s);
  return job;
}

TEST(SpareSwapTest, KeepsSurvivorsWaitsForDrainingReplacesLost) {
  control::JobInfo job = Restarting({"a", "b"}, {"c"});
  control::ListWorkersReply workers;
  *workers.add_workers() = Worker("a");
  *workers.add_workers() = Worker("b", /*alive=*/false);
  *workers.add_workers() = Worker("c");
  *workers.add_workers() = Worker("d");
  workers.mutable_workers(0)->add_holds("job-1/0");
  // a still stops its ranks: wait.
  std::vector<control::WorkerInfo> idle = {workers.workers(2),
                                           workers.workers(3)};
  EXPECT_EQ(PlanSpareSwap(job, workers, idle, {}).kind,
            SpareSwap::Kind::kWait);
  // a drained: a keeps node 0, the reserved spare c takes b's place (not d,
  // which comes first in no order but is not reserved).
  workers.mutable_workers(0)->clear_holds();
  idle = {workers.workers(3), workers.workers(0), workers.workers(2)};
  SpareSwap s = PlanSpareSwap(job, workers, idle, {});
  ASSERT_EQ(s.kind, SpareSwap::Kind::kReady);
  ASSERT_EQ(s.nodes.size(), 2u);
  EXPECT_EQ(s.nodes[0].worker_id(), "w-a");
  EXPECT_EQ(s.nodes[1].worker_id(), "w-c");
  ASSERT_EQ(s.swaps.size(), 1u);
  EXPECT_EQ(s.swaps[0], (std::pair<std::string, std::string>{"b", "c"}));
}

TEST(SpareSwapTest, NotApplicableWithoutEnoughFittingIdleWorkers) {
  control::JobInfo job = Restarting({"a", "b"}, {});
  control::ListWorkersReply workers;
  *workers.add_workers() = Worker("a");
  *workers.add_workers() = Worker("b", false);
  *workers.add_workers() = Worker("g", true, /*gpus=*/4);
  // ranks_per_node unset: one rank per GPU; g would run 4 ranks, b ran 1.
  std::vector<control::WorkerInfo> idle = {workers.workers(0),
                                           workers.workers(2)};
  EXPECT_EQ(PlanSpareSwap(job, workers, idle, {}).kind,
            SpareSwap::Kind::kNone);
  // A first attempt and a re-measured node speed never swap.
  job.set_attempt(0);
  EXPECT_EQ(PlanSpareSwap(job, workers, idle, {}).kind,
            SpareSwap::Kind::kNone);
  job.set_attempt(1);
  (*job.mutable_node_speed())["a"] = 0.5;
  EXPECT_EQ(PlanSpareSwap(job, workers, idle, {}).kind,
            SpareSwap::Kind::kNone);
}

TEST(ReserveSparesTest, DropsDeadAndTakenTopsUpFromIdle) {
  control::JobInfo job = Restarting({"a"}, {"b", "c"});
  control::ListWorkersReply workers;
  for (const char* n : {"a", "b", "c", "d", "e"}) {
    *workers.add_workers() = Worker(n);
  }
  workers.mutable_workers(1)->set_alive(false);  // b died
  const std::vector<control::WorkerInfo> idle = {workers.workers(3),
                                                 workers.workers(4)};
  // c was taken by another job: d and e replace b and c.
  EXPECT_EQ(ReserveSpares(job, workers, idle, {"w-a"}, {"w-c"}),
            (std::vector<std::string>{"w-d", "w-e"}));
  // Untouched reservation keeps its order.
  workers.mutable_workers(1)->set_alive(true);
  EXPECT_EQ(ReserveSpares(job, workers, idle, {"w-a"}, {}),
            (std::vector<std::string>{"w-b", "w-c"}));
}

TEST(SparePoolTest, SplitsIdleIntoFreeAndReserved) {
  control::JobsReply jobs;
  control::JobInfo* j = jobs.add_jobs();
  j->set_job_id("job-1");
  j->set_state(control::RUNNING);
  j->add_nodes("w-a");
  j->add_spare_workers("w-b");
  control::JobInfo* done = jobs.add_jobs();  // an ended job reserves nothing
  done->set_job_id("job-0");
  done->set_state(control::SUCCEEDED);
  done->add_spare_workers("w-c");
  control::ListWorkersReply workers;
  for (const char* n : {"a", "b", "c"}) *workers.add_workers() = Worker(n);
  *workers.add_workers() = Worker("d", false);
  const observe::SparePool pool = observe::ComputeSparePool(jobs, workers);
  EXPECT_EQ(pool.free, (std::vector<std::string>{"w-c"}));
  EXPECT_EQ(pool.reserved.at("w-b"), "job-1");
  EXPECT_EQ(pool.busy, (std::vector<std::string>{"w-a"}));
  EXPECT_EQ(pool.lost, 1);
  EXPECT_EQ(observe::DescribeSparePool(pool),
            "2 idle: 1 free [w-c], 1 reserved as spares [w-b for job-1]; 1 "
            "busy; 1 lost");
}

}  // namespace
}  // namespace strata::coordinator
