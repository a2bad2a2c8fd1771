// Finding 3 of issue 30 (one rank's word decides another node's fate): in a
// 2-node job under `straggler=evict`, rank 0 adds wait = 0.6 x step to its
// own sections, which made the honest rank 1 look 2.5x slower and got its
// node evicted. Through the coordinator's real path (heartbeats -> report
// intake -> fault monitor -> policy), with the arrival evidence the workers
// attach from the flight recorders (StepReport.recorded_*): the honest node
// must not be flagged or evicted, while a rank that really is 2x slower
// still is.
#include <gtest/gtest.h>

#include <random>

#include "tests/security/security_fixture.h"

namespace strata::coordinator {
namespace {

class StragglerEvidenceTest : public SecurityTest {
 protected:
  // A 2-node job, one rank each, that evicts a straggler's node.
  void SetUpJob() {
    Register("dn1");
    Register("dn2");
    control::Request r;
    JobSpec* spec = r.mutable_submit_job()->mutable_spec();
    spec->set_name("j");
    spec->mutable_launch()->add_command("/bin/true");
    spec->mutable_launch()->set_nodes(2);
    spec->mutable_launch()->set_ranks_per_node(1);
    spec->mutable_launch()->set_min_nodes(1);
    spec->mutable_launch()->set_max_restarts(3);
    spec->mutable_fault()->set_straggler(FaultPolicy::evict);
    spec->mutable_fault()->set_restart_cost_s(1);
    control::Reply reply = Call(r, Who(Role::kUser, "alice"));
    ASSERT_EQ(Code(reply), 0) << reply.status().message();
    job_ = reply.submit_job().job_id();
    f_.service->Tick();
    for (const char* node : {"dn1", "dn2"}) {
      Beat(node, &held_[node]);
      for (const auto& h : held_[node]) node_of_[h.rank()] = node;
    }
    ASSERT_EQ(node_of_.size(), 2u);
    ASSERT_EQ(Job(job_).state(), control::RUNNING);
  }

  // One step: each rank computes compute[r] seconds, then waits in the
  // gradient all-reduce for the slower one (0.01 s of transfer); rank 0
  // claims `extra_wait` x step more wait than it had. What the workers read
  // from the recorders is the truth: the share of time in collectives.
  void Step(int64_t step, const double compute[2], double extra_wait) {
    std::normal_distribution<double> noise(1.0, 0.02);
    double c[2] = {compute[0] * noise(rng_), compute[1] * noise(rng_)};
    const double comm = 0.01;
    const double step_s = std::max(c[0], c[1]) + comm;
    for (int rank = 0; rank < 2; ++rank) {
      const double wait = step_s - comm - c[rank];
      control::StepReport s;
      s.set_job_id(job_);
      s.set_rank(rank);
      s.set_step(step);
      s.set_step_seconds(step_s);
      s.set_total_steps(1000);
      auto& sec = *s.mutable_section_seconds();
      sec["forward"] = c[rank] * 0.4;
      sec["backward"] = c[rank] * 0.6;
      sec["comm"] = comm;
      sec["wait"] = wait + (rank == 0 ? extra_wait * step_s : 0);
      s.set_recorded_ops(10);
      s.set_recorded_share((wait + comm) / step_s);
      const std::string& node = node_of_[rank];
      control::Request r = Heartbeat("w-" + node);
      for (const auto& h : held_[node]) *r.mutable_heartbeat()->add_ranks() = h;
      *r.mutable_heartbeat()->add_steps() = s;
      ASSERT_EQ(Code(Call(r, Who(Role::kWorker, node))), 0);
    }
    f_.clock.Advance(static_cast<int64_t>(step_s * 1000));
  }

  // "straggler" and "evicted" events of the job so far.
  std::vector<control::Event> Findings() {
    std::vector<control::Event> out;
    auto events = f_.events->List(job_, 0);
    EXPECT_TRUE(events.ok());
    for (const auto& e : events->events()) {
      if (e.kind() == "straggler" || e.kind() == "evicted") out.push_back(e);
    }
    return out;
  }

  std::string job_;
  std::map<std::string, std::vector<control::RankReport>> held_;
  std::map<int, std::string> node_of_;
  std::mt19937 rng_{5};
};

TEST_F(StragglerEvidenceTest, ARankInflatingItsWaitCannotEvictItsPeer) {
  SetUpJob();
  const double balanced[2] = {0.3, 0.3};
  for (int64_t step = 1; step <= 80; ++step) Step(step, balanced, 0.6);
  EXPECT_TRUE(Findings().empty()) << Findings()[0].message();
  const control::JobInfo job = Job(job_);
  EXPECT_EQ(job.state(), control::RUNNING);
  EXPECT_EQ(job.attempt(), 0);
  EXPECT_EQ(job.restart_count(), 0);
}

TEST_F(StragglerEvidenceTest, ARealStragglerIsStillFoundAndEvicted) {
  SetUpJob();
  const double slow[2] = {0.3, 0.6};  // rank 1 is 2x slower from the start
  for (int64_t step = 1; step <= 80; ++step) Step(step, slow, 0);
  const std::vector<control::Event> found = Findings();
  ASSERT_GE(found.size(), 2u);
  EXPECT_EQ(found[0].kind(), "straggler");
  EXPECT_NE(found[0].message().find("rank 1 on " + node_of_[1]),
            std::string::npos)
      << found[0].message();
  EXPECT_EQ(found[1].kind(), "evicted");
  EXPECT_NE(found[1].message().find(node_of_[1]), std::string::npos)
      << found[1].message();
}

}  // namespace
}  // namespace strata::coordinator
