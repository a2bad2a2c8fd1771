// Finding 2 of issue 30 (cross-job telemetry forgery) and the total_steps
// part of finding 3: a worker's reports count only for ranks placed on it in
// the running attempt, steps only move forward within the job's declared
// steps, and made-up rank numbers cost the coordinator nothing.
#include <gtest/gtest.h>

#include "tests/security/security_fixture.h"

namespace strata::coordinator {
namespace {

class TelemetryTest : public SecurityTest {
 protected:
  static control::StepReport Step(const std::string& job, int rank,
                                  int64_t step, int64_t total = 100) {
    control::StepReport s;
    s.set_job_id(job);
    s.set_rank(rank);
    s.set_step(step);
    s.set_step_seconds(0.1);
    s.set_total_steps(total);
    return s;
  }
  void Send(const std::string& node, std::vector<control::StepReport> steps) {
    control::Request r = Heartbeat("w-" + node);
    for (const auto& h : held_) {
      if (placed_on_[h.job_id()] == node) *r.mutable_heartbeat()->add_ranks() = h;
    }
    for (auto& s : steps) *r.mutable_heartbeat()->add_steps() = std::move(s);
    EXPECT_EQ(Code(Call(r, Who(Role::kWorker, node))), 0);
  }
  // Latest step per rank the coordinator keeps for `job`.
  std::map<int, int64_t> Latest(const std::string& job) {
    std::map<int, int64_t> out;
    const control::JobsReply all = f_.jobs->List(true);
    for (const auto& j : all.jobs()) {
      if (j.job_id() != job) continue;
      for (const auto& s : j.steps()) out[s.rank()] = s.step();
    }
    return out;
  }
  // job3 on dn1, job4 on dn2, each one rank.
  void SetUpJobs() {
    Register("dn1");
    job3_ = Submit("alice");
    f_.service->Tick();
    std::vector<control::RankReport> h1;
    Beat("dn1", &h1);
    Beat("dn1", &h1);  // now holding job 3: not idle for job 4
    Register("dn2");
    job4_ = Submit("mallory");
    f_.service->Tick();
    std::vector<control::RankReport> h2;
    Beat("dn2", &h2);
    for (auto& h : h1) placed_on_[h.job_id()] = "dn1";
    for (auto& h : h2) placed_on_[h.job_id()] = "dn2";
    held_ = h1;
    held_.insert(held_.end(), h2.begin(), h2.end());
    ASSERT_EQ(Job(job3_).state(), control::RUNNING);
    ASSERT_EQ(Job(job4_).state(), control::RUNNING);
  }
  std::string job3_, job4_;
  std::vector<control::RankReport> held_;
  std::map<std::string, std::string> placed_on_;
};

TEST_F(TelemetryTest, ReportsForAnotherWorkersRanksAreDropped) {
  SetUpJobs();
  Send("dn1", {Step(job3_, 0, 1)});
  // The attack: job 4's worker (its rank wrote to $STRATA_TELEMETRY) pushes
  // 800 reports for job 3, and 150,000 with made-up rank numbers.
  std::vector<control::StepReport> forged;
  for (int i = 0; i < 800; ++i) forged.push_back(Step(job3_, 0, 2 + i));
  for (int i = 0; i < 150000; ++i) forged.push_back(Step(job4_, 1000 + i, 1));
  Send("dn2", std::move(forged));
  EXPECT_EQ(Latest(job3_), (std::map<int, int64_t>{{0, 1}}));
  EXPECT_EQ(Latest(job4_).size(), 0u);
  EXPECT_GE(f_.service->dropped_reports(), 150800u);
  // Rank states for ranks it was never given are ignored, and the attempt
  // it claims is stopped on it.
  control::Request r = Heartbeat("w-dn2");
  control::RankReport fake = held_[0];  // job 3's rank 0, placed on dn1
  fake.set_state(control::RANK_EXITED);
  fake.set_exit_code(1);
  *r.mutable_heartbeat()->add_ranks() = fake;
  control::Reply reply = Call(r, Who(Role::kWorker, "dn2"));
  EXPECT_EQ(Job(job3_).state(), control::RUNNING);
  EXPECT_EQ(Job(job3_).restart_count(), 0);
  // Honest reports go on.
  Send("dn1", {Step(job3_, 0, 2)});
  EXPECT_EQ(Latest(job3_), (std::map<int, int64_t>{{0, 2}}));
}

TEST_F(TelemetryTest, StepsMoveForwardWithinTheDeclaredSteps) {
  SetUpJobs();
  Send("dn1", {Step(job3_, 0, 5, 100)});
  Send("dn1", {Step(job3_, 0, 3, 100)});         // backwards
  Send("dn1", {Step(job3_, 0, 5, 100)});         // not forward
  Send("dn1", {Step(job3_, 0, 500, 1000000000)});  // past the declared 100
  EXPECT_EQ(Latest(job3_), (std::map<int, int64_t>{{0, 5}}));
  // A later report cannot stretch total_steps (the restart-cost guard).
  Send("dn1", {Step(job3_, 0, 6, 1000000000)});
  const control::JobsReply all = f_.jobs->List(true);
  for (const auto& j : all.jobs()) {
    if (j.job_id() != job3_) continue;
    ASSERT_EQ(j.steps_size(), 1);
    EXPECT_EQ(j.steps(0).step(), 6);
    EXPECT_EQ(j.steps(0).total_steps(), 100);
  }
}

}  // namespace
}  // namespace strata::coordinator
