// JobManager's restart backoff (fault/restart_backoff.h): a job whose ranks
// fail at once is placed again at once the first time, then only after
// 1 s, 2 s, ...; the delay is in the job's message (strata status) and in
// its "restarting" events.
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "tests/unit/coordinator/control_fixture.h"

namespace strata::coordinator {
namespace {

class RestartBackoffHookTest : public ::testing::Test {
 protected:
  control::Reply Call(control::Request r) { return f_.service->Handle(r); }

  std::string Register(const std::string& node) {
    control::Request r;
    r.mutable_register_worker()->set_node_name(node);
    r.mutable_register_worker()->set_address("10.0.0.1");  // as JobsTest
    r.mutable_register_worker()->mutable_probe()->set_cpu_cores(8);
    r.mutable_register_worker()->mutable_probe()->set_memory_bytes(64LL << 30);
    control::Reply reply = Call(r);
    EXPECT_EQ(reply.status().code(), 0) << reply.status().message();
    return reply.register_worker().worker_id();
  }

  control::HeartbeatReply Beat(const std::string& id,
                               const std::vector<control::RankReport>& ranks) {
    control::Request r;
    r.mutable_heartbeat()->set_worker_id(id);
    for (const auto& rr : ranks) *r.mutable_heartbeat()->add_ranks() = rr;
    return Call(r).heartbeat();
  }

  // Ticks, takes the launch orders and reports every rank exited 1.
  // Returns false if nothing was launched.
  bool LaunchAndFail(const std::string& w) {
    f_.service->Tick();
    control::HeartbeatReply orders = Beat(w, {});
    if (orders.launch_size() == 0) return false;
    std::vector<control::RankReport> exited;
    for (const auto& l : orders.launch()) {
      control::RankReport r;
      r.set_job_id(l.job_id());
      r.set_attempt(l.attempt());
      r.set_rank(l.rank());
      r.set_state(control::RANK_EXITED);
      r.set_exit_code(1);
      exited.push_back(r);
    }
    Beat(w, exited);
    Beat(w, {});  // the stopped attempt is forgotten
    return true;
  }

  ControlFixture f_;
};

TEST_F(RestartBackoffHookTest, ConsecutiveFailuresWaitLongerEachTime) {
  JobSpec spec;
  spec.set_name("crash");
  spec.mutable_launch()->add_command("/bin/false");
  spec.mutable_launch()->set_nodes(1);
  spec.mutable_launch()->set_ranks_per_node(1);
  spec.mutable_launch()->set_max_restarts(10);
  auto id = f_.jobs->Submit(spec, nullptr, "");
  ASSERT_TRUE(id.ok()) << id.status();
  const std::string w = Register("n1");

  ASSERT_TRUE(LaunchAndFail(w));  // attempt 0
  EXPECT_NE(f_.jobs->Get(*id)->message().find("restart at once"),
            std::string::npos)
      << f_.jobs->Get(*id)->message();
  ASSERT_TRUE(LaunchAndFail(w));  // attempt 1, placed at once
  EXPECT_NE(f_.jobs->Get(*id)->message().find(
                "next attempt in 1.0 s (backoff: failure 2 in a row)"),
            std::string::npos)
      << f_.jobs->Get(*id)->message();
  EXPECT_FALSE(LaunchAndFail(w));  // not before 1 s
  f_.clock.Advance(999);
  EXPECT_FALSE(LaunchAndFail(w));
  f_.clock.Advance(1);
  ASSERT_TRUE(LaunchAndFail(w));  // attempt 2 after 1 s
  f_.clock.Advance(1999);
  EXPECT_FALSE(LaunchAndFail(w));
  f_.clock.Advance(1);
  ASSERT_TRUE(LaunchAndFail(w));  // attempt 3 after 2 s
  EXPECT_EQ(f_.jobs->Get(*id)->state(), control::PENDING);
  EXPECT_EQ(f_.jobs->Get(*id)->restart_count(), 4);

  int with_backoff = 0;
  const control::EventsReply events = *f_.events->List(*id, 0);
  for (const auto& e : events.events()) {
    if (e.kind() == "restarting" &&
        e.message().find("(backoff: failure") != std::string::npos)
      ++with_backoff;
  }
  EXPECT_EQ(with_backoff, 3);
}

}  // namespace
}  // namespace strata::coordinator
