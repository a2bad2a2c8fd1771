// Placement off the event loop (coordinator/jobs/placement_task.h, with
// JobOptions::async_placement_nodes 1 so every attempt takes that path):
// the tick that decides a placement leaves the job PENDING, a later tick
// applies the computed attempt; a result whose workers changed meanwhile
// (lost, given to another job) is dropped and the attempt placed again on
// the workers there are then; a job cancelled meanwhile stays cancelled.
#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <vector>

#include "coordinator/jobs/placement_task.h"
#include "tests/unit/coordinator/control_fixture.h"

namespace strata::coordinator {
namespace {

JobSpec Spec(int nodes, int rpn = 2) {
  JobSpec spec;
  spec.set_name("async");
  spec.mutable_launch()->add_command("/bin/true");
  spec.mutable_launch()->set_nodes(nodes);
  spec.mutable_launch()->set_ranks_per_node(rpn);
  return spec;
}

JobOptions AsyncOptions() {
  JobOptions o;
  o.default_worker_wait_ms = 10000;
  o.default_grace_ms = 100;
  o.async_placement_nodes = 1;
  return o;
}

class PlacementAsyncTest : public ::testing::Test {
 protected:
  control::Reply Call(control::Request r) { return f_.service->Handle(r); }

  std::string Register(const std::string& node) {
    control::Request r;
    r.mutable_register_worker()->set_node_name(node);
    r.mutable_register_worker()->set_address("10.0.0." + node.substr(1));
    r.mutable_register_worker()->mutable_probe()->set_cpu_cores(8);
    r.mutable_register_worker()->mutable_probe()->set_memory_bytes(64LL << 30);
    control::Reply reply = Call(r);
    EXPECT_EQ(reply.status().code(), 0) << reply.status().message();
    return reply.register_worker().worker_id();
  }

  control::HeartbeatReply Beat(const std::string& id) {
    control::Request r;
    r.mutable_heartbeat()->set_worker_id(id);
    control::Reply reply = Call(r);
    EXPECT_EQ(reply.status().code(), 0) << reply.status().message();
    return reply.heartbeat();
  }

  std::string Submit(const JobSpec& spec) {
    control::Request r;
    *r.mutable_submit_job()->mutable_spec() = spec;
    control::Reply reply = Call(r);
    EXPECT_EQ(reply.status().code(), 0) << reply.status().message();
    return reply.submit_job().job_id();
  }

  control::JobInfo Job(const std::string& id) { return *f_.jobs->Get(id); }

  // One tick that starts placements, then the tick that applies them.
  void TickTwice() {
    f_.service->Tick();
    f_.jobs->WaitForPlacements();
    f_.service->Tick();
  }

  ControlFixture f_{AsyncOptions()};
};

TEST_F(PlacementAsyncTest, PlacedOnALaterTickWithTheSameOrders) {
  const std::string id = Submit(Spec(2));
  const std::string w1 = Register("n1"), w2 = Register("n2");
  f_.service->Tick();
  EXPECT_EQ(Job(id).state(), control::PENDING);  // computed off the loop
  f_.jobs->WaitForPlacements();
  f_.service->Tick();
  const control::JobInfo job = Job(id);
  ASSERT_EQ(job.state(), control::RUNNING) << job.message();
  EXPECT_EQ(job.ranks_size(), 4);
  EXPECT_GT(job.master_port(), 0);
  // The record read back from the store is the one applied.
  const std::vector<std::string> nodes(job.nodes().begin(), job.nodes().end());
  EXPECT_EQ(nodes, (std::vector<std::string>{w1, w2}));
  for (const auto& w : {w1, w2}) {
    const control::HeartbeatReply orders = Beat(w);
    ASSERT_EQ(orders.launch_size(), 2) << w;
    EXPECT_EQ(orders.launch(0).env().at("WORLD_SIZE"), "4");
    EXPECT_FALSE(orders.launch(0).plan_json().empty());
  }
}

TEST_F(PlacementAsyncTest, WorkerLostMeanwhileIsPlacedAgainWithoutIt) {
  const std::string id = Submit(Spec(2));
  const std::string w1 = Register("n1"), w2 = Register("n2");
  f_.service->Tick();  // placement on n1, n2 under way
  f_.jobs->WaitForPlacements();
  // n2 falls silent before the result is applied; n1 and a new n3 beat.
  const std::string w3 = Register("n3");
  for (int i = 0; i < 4; ++i) {
    f_.clock.Advance(1000);
    Beat(w1);
    Beat(w3);
  }
  f_.service->Tick();  // n2 lost; the result is dropped, placed again
  EXPECT_EQ(Job(id).state(), control::PENDING);
  TickTwice();
  const control::JobInfo job = Job(id);
  ASSERT_EQ(job.state(), control::RUNNING) << job.message();
  const std::vector<std::string> nodes(job.nodes().begin(), job.nodes().end());
  EXPECT_EQ(nodes, (std::vector<std::string>{w1, w3}));
}

TEST_F(PlacementAsyncTest, WorkerTakenByAnotherJobMeanwhileIsNotShared) {
  // Two 1-node jobs decided in the same tick on the only idle worker: one
  // applies first, the other's result names a taken worker and is dropped.
  const std::string a = Submit(Spec(1)), b = Submit(Spec(1));
  const std::string w1 = Register("n1");
  TickTwice();
  const control::JobInfo ja = Job(a), jb = Job(b);
  EXPECT_EQ((ja.state() == control::RUNNING) + (jb.state() == control::RUNNING),
            1)
      << ja.message() << " / " << jb.message();
  // The second gets the next worker that comes.
  const std::string w2 = Register("n2");
  TickTwice();
  EXPECT_EQ(Job(a).state(), control::RUNNING);
  EXPECT_EQ(Job(b).state(), control::RUNNING);
  EXPECT_NE(Job(a).nodes(0), Job(b).nodes(0));
}

TEST_F(PlacementAsyncTest, CancelledWhilePlacedStaysCancelled) {
  const std::string id = Submit(Spec(1));
  Register("n1");
  f_.service->Tick();
  control::Request r;
  r.mutable_cancel_job()->set_job_id(id);
  ASSERT_EQ(Call(r).status().code(), 0);
  f_.jobs->WaitForPlacements();
  f_.service->Tick();
  EXPECT_EQ(Job(id).state(), control::CANCELLED);
}

TEST(LightCopyTest, LeavesTheRecordWholeAndTheCopyWithoutItsLists) {
  control::JobInfo job;
  job.set_job_id("job-1");
  job.add_nodes("w-1");
  job.add_node_info()->set_worker_id("w-1");
  job.add_ranks()->set_rank(0);
  job.mutable_plan()->set_tp(2);
  job.add_evicted_nodes("n9");
  const std::string before = job.SerializeAsString();
  const control::JobInfo light = LightCopy(job);
  EXPECT_EQ(job.SerializeAsString(), before);
  EXPECT_EQ(light.job_id(), "job-1");
  EXPECT_EQ(light.evicted_nodes_size(), 1);
  EXPECT_EQ(light.nodes_size() + light.node_info_size() + light.ranks_size(),
            0);
  EXPECT_FALSE(light.has_plan());
}

}  // namespace
}  // namespace strata::coordinator
