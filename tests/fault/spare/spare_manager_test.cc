// Hot spares against JobManager with a fake clock over a real RocksDB
// (docs/fault.md "Hot spares"): launch.spares reserves idle workers that no
// other job may take, a short reservation is said and topped up, a lost
// node is replaced by a spare with the same plan (event spare_used, no
// re-plan) or, when every rank opted in, in place, two lost at once take
// two spares, a spare lost while being
// brought in is replaced by the next one, and without an idle spare the
// job re-plans on fewer nodes as before.
#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <vector>

#include "coordinator/jobs/job_manager.h"
#include "tests/unit/coordinator/control_fixture.h"

namespace strata::coordinator {
namespace {

JobSpec Spec(int nodes, int spares, int min_nodes = 0) {
  JobSpec spec;
  spec.set_name("spare");
  spec.mutable_launch()->add_command("/bin/true");
  spec.mutable_launch()->set_nodes(nodes);
  spec.mutable_launch()->set_ranks_per_node(1);
  spec.mutable_launch()->set_max_restarts(3);
  if (spares > 0) spec.mutable_launch()->set_spares(spares);
  if (min_nodes > 0) spec.mutable_launch()->set_min_nodes(min_nodes);
  return spec;
}

class SpareTest : public ::testing::Test {
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

  // A heartbeat of `id` holding `held`; returns the orders.
  control::HeartbeatReply Beat(const std::string& id,
                               const std::vector<control::RankReport>& held) {
    control::Request r;
    r.mutable_heartbeat()->set_worker_id(id);
    for (const auto& rr : held) *r.mutable_heartbeat()->add_ranks() = rr;
    control::Reply reply = Call(r);
    EXPECT_EQ(reply.status().code(), 0) << reply.status().message();
    return reply.heartbeat();
  }

  // The ranks the orders launch, reported running.
  static std::vector<control::RankReport> Running(
      const control::HeartbeatReply& orders) {
    std::vector<control::RankReport> out;
    for (const auto& l : orders.launch()) {
      control::RankReport r;
      r.set_job_id(l.job_id());
      r.set_attempt(l.attempt());
      r.set_rank(l.rank());
      r.set_state(control::RANK_RUNNING);
      r.set_pid(1000 + l.rank());
      out.push_back(r);
    }
    return out;
  }

  std::string Submit(const JobSpec& spec) {
    control::Request r;
    *r.mutable_submit_job()->mutable_spec() = spec;
    control::Reply reply = Call(r);
    EXPECT_EQ(reply.status().code(), 0) << reply.status().message();
    return reply.submit_job().job_id();
  }

  control::JobInfo Job(const std::string& id) { return *f_.jobs->Get(id); }

  std::vector<std::string> Nodes(const std::string& id) {
    const control::JobInfo j = Job(id);
    return {j.nodes().begin(), j.nodes().end()};
  }
  std::vector<std::string> Spares(const std::string& id) {
    const control::JobInfo j = Job(id);
    return {j.spare_workers().begin(), j.spare_workers().end()};
  }

  // "kind: message" of every event of job `id`.
  std::vector<std::string> Events(const std::string& id) {
    std::vector<std::string> out;
    const control::EventsReply events = *f_.events->List(id, 0);
    for (const auto& e : events.events()) {
      out.push_back(e.kind() + ": " + e.message());
    }
    return out;
  }
  bool HasEvent(const std::string& id, const std::string& text) {
    const auto ev = Events(id);
    return std::any_of(ev.begin(), ev.end(), [&](const std::string& e) {
      return e.find(text) != std::string::npos;
    });
  }

  // `beating` keep reporting what they hold while the others fall silent,
  // for `ms`; the coordinator ticks every second.
  void Silence(const std::vector<std::pair<std::string,
                                           std::vector<control::RankReport>>>&
                   beating,
               int ms) {
    for (int t = 0; t < ms; t += 1000) {
      f_.clock.Advance(1000);
      for (const auto& [id, held] : beating) Beat(id, held);
      f_.service->Tick();
    }
  }

  ControlFixture f_;
};

TEST_F(SpareTest, SparesAreReservedAndNoOtherJobTakesThem) {
  const std::string w1 = Register("n1"), w2 = Register("n2"),
                    w3 = Register("n3");
  const std::string a = Submit(Spec(1, 1));
  f_.service->Tick();
  ASSERT_EQ(Job(a).state(), control::RUNNING) << Job(a).message();
  EXPECT_EQ(Nodes(a), (std::vector<std::string>{w1}));
  EXPECT_EQ(Spares(a), (std::vector<std::string>{w2}));
  EXPECT_TRUE(HasEvent(a, "spares: 1 of 1 spare(s) reserved [w-n2]"));
  // Job b wants 2 nodes: n3 is idle, n2 is a's spare: it waits.
  const std::string b = Submit(Spec(2, 0));
  f_.service->Tick();
  EXPECT_EQ(Job(b).state(), control::PENDING);
  // One node is enough for c: it gets n3, never n2.
  const std::string c = Submit(Spec(1, 0));
  f_.service->Tick();
  ASSERT_EQ(Job(c).state(), control::RUNNING);
  EXPECT_EQ(Nodes(c), (std::vector<std::string>{w3}));
  EXPECT_EQ(Spares(a), (std::vector<std::string>{w2}));
}

TEST_F(SpareTest, ShortReservationIsSaidAndToppedUpLater) {
  const std::string w1 = Register("n1"), w2 = Register("n2");
  const std::string a = Submit(Spec(1, 2));
  f_.service->Tick();
  ASSERT_EQ(Job(a).state(), control::RUNNING);  // starts without the rest
  EXPECT_EQ(Spares(a), (std::vector<std::string>{w2}));
  EXPECT_TRUE(HasEvent(a, "spares_short: 1 of 2 spare(s) reserved [w-n2]; "
                          "started without the rest"));
  const std::string w3 = Register("n3");
  f_.service->Tick();
  EXPECT_EQ(Spares(a), (std::vector<std::string>{w2, w3}));
  EXPECT_TRUE(HasEvent(a, "spares: 2 of 2 spare(s) reserved [w-n2,w-n3]"));
}

TEST_F(SpareTest, LostNodeIsReplacedBySpareWithTheSamePlan) {
  const std::string w1 = Register("n1"), w2 = Register("n2"),
                    w3 = Register("n3");
  const std::string a = Submit(Spec(2, 1));
  f_.service->Tick();
  ASSERT_EQ(Job(a).state(), control::RUNNING);
  const Plan plan = Job(a).plan();
  const auto held1 = Running(Beat(w1, {}));
  Beat(w2, Running(Beat(w2, {})));
  // n2 falls silent; n1 and the idle spare keep beating.
  Silence({{w1, held1}, {w3, {}}}, 4000);
  ASSERT_EQ(Job(a).restart_count(), 1);
  EXPECT_EQ(Beat(w1, held1).stop(0), a + "/0");
  Beat(w1, {});  // n1's ranks stopped
  f_.service->Tick();
  const control::JobInfo j = Job(a);
  ASSERT_EQ(j.state(), control::RUNNING) << j.message();
  EXPECT_EQ(Nodes(a), (std::vector<std::string>{w1, w3}));  // n1 keeps index 0
  EXPECT_EQ(j.plan().SerializeAsString(), plan.SerializeAsString());
  EXPECT_TRUE(HasEvent(a, "spare_used: node n2 replaced by spare n3: same "
                          "plan, tp=1 pp=1 dp=2 on 2 nodes"));
  EXPECT_FALSE(HasEvent(a, "replanned"));
  // No idle worker is left: the reservation says so.
  EXPECT_TRUE(Spares(a).empty());
  EXPECT_TRUE(HasEvent(a, "spares_short: 0 of 1 spare(s) reserved []"));
  EXPECT_EQ(Beat(w3, {}).launch_size(), 1);
}

// Every rank opted in to in-place restart (docs/fault.md "Node loss in
// place"): the attempt is kept, the spare takes the lost node's index and
// is ordered to start its rank with generation 1 (a replace order, never a
// launch order), the survivor keeps its rank, and the generation, the
// replaced ranks and the replica endpoints are in the KV for the ranks.
TEST_F(SpareTest, LostNodeOfAnInPlaceJobIsReplacedInPlace) {
  const std::string w1 = Register("n1"), w2 = Register("n2"),
                    w3 = Register("n3");
  const std::string a = Submit(Spec(2, 1));
  f_.service->Tick();
  ASSERT_EQ(Job(a).state(), control::RUNNING);
  const auto held1 = Running(Beat(w1, {}));
  const auto held2 = Running(Beat(w2, {}));
  // Both ranks report a step, opted in.
  for (const auto& [id, held] : {std::pair{w1, held1}, std::pair{w2, held2}}) {
    control::Request r;
    r.mutable_heartbeat()->set_worker_id(id);
    for (const auto& rr : held) *r.mutable_heartbeat()->add_ranks() = rr;
    control::StepReport* s = r.mutable_heartbeat()->add_steps();
    s->set_job_id(a);
    s->set_rank(held[0].rank());
    s->set_step(5);
    s->set_step_seconds(0.1);
    s->set_in_place(true);
    ASSERT_EQ(Call(r).status().code(), 0);
  }
  Silence({{w1, held1}, {w3, {}}}, 4000);
  control::JobInfo j = Job(a);
  ASSERT_EQ(j.state(), control::RUNNING) << j.message();
  EXPECT_EQ(j.attempt(), 0);
  EXPECT_EQ(j.generation(), 1);
  EXPECT_EQ(Nodes(a), (std::vector<std::string>{w1, w3}));
  EXPECT_FALSE(HasEvent(a, "attempt_failed"));
  EXPECT_TRUE(HasEvent(a, "spare_used: node n2 replaced by spare n3 in "
                          "place: generation 1, same plan"));
  // The survivor keeps its rank: no stop, no launch, no replace order.
  const control::HeartbeatReply kept = Beat(w1, held1);
  EXPECT_EQ(kept.stop_size(), 0);
  EXPECT_EQ(kept.launch_size(), 0);
  EXPECT_EQ(kept.replace_size(), 0);
  // The spare starts rank 1 with the generation, until it reports it.
  const control::HeartbeatReply orders = Beat(w3, {});
  EXPECT_EQ(orders.launch_size(), 0);
  ASSERT_EQ(orders.replace_size(), 1);
  EXPECT_EQ(orders.replace(0).rank(), 1);
  EXPECT_EQ(orders.replace(0).generation(), 1);
  EXPECT_EQ(orders.replace(0).env().at("STRATA_RESTART_GENERATION"), "1");
  control::RankReport started;
  started.set_job_id(a);
  started.set_attempt(0);
  started.set_rank(1);
  started.set_state(control::RANK_RUNNING);
  started.set_pid(2001);
  started.set_generation(1);
  EXPECT_EQ(Beat(w3, {started}).replace_size(), 0);
  EXPECT_EQ(*f_.kv->Get(a + "/0/inplace/generation"), "1");
  EXPECT_EQ(*f_.kv->Get(a + "/0/g1/inplace/replaced"), "1");
  // The lost worker, back, is told to stop what it held of the attempt.
  EXPECT_EQ(Beat(w2, held2).stop(0), a + "/0");
}

TEST_F(SpareTest, TwoNodesLostAtOnceTakeTwoSpares) {
  const std::string w1 = Register("n1"), w2 = Register("n2"),
                    w3 = Register("n3"), w4 = Register("n4");
  const std::string a = Submit(Spec(2, 2));
  f_.service->Tick();
  ASSERT_EQ(Job(a).state(), control::RUNNING);
  EXPECT_EQ(Spares(a), (std::vector<std::string>{w3, w4}));
  Beat(w1, Running(Beat(w1, {})));
  Beat(w2, Running(Beat(w2, {})));
  Silence({{w3, {}}, {w4, {}}}, 4000);
  const control::JobInfo j = Job(a);
  ASSERT_EQ(j.state(), control::RUNNING) << j.message();
  EXPECT_EQ(Nodes(a), (std::vector<std::string>{w3, w4}));
  EXPECT_EQ(j.plan().dp(), 2);
  EXPECT_TRUE(HasEvent(a, "spare_used: node n1 replaced by spare n3"));
  EXPECT_TRUE(HasEvent(a, "spare_used: node n2 replaced by spare n4"));
}

TEST_F(SpareTest, SpareLostWhileBroughtInIsReplacedByTheNext) {
  const std::string w1 = Register("n1"), w2 = Register("n2"),
                    w3 = Register("n3"), w4 = Register("n4");
  const std::string a = Submit(Spec(2, 2));
  f_.service->Tick();
  const auto held1 = Running(Beat(w1, {}));
  Beat(w2, Running(Beat(w2, {})));
  Silence({{w1, held1}, {w3, {}}, {w4, {}}}, 4000);
  Beat(w1, {});
  f_.service->Tick();
  ASSERT_EQ(Nodes(a), (std::vector<std::string>{w1, w3}));
  // n3 dies before it starts its rank: attempt 1 fails, n4 takes its place.
  const auto held1b = Running(Beat(w1, {}));
  Silence({{w1, held1b}, {w4, {}}}, 4000);
  ASSERT_EQ(Job(a).attempt(), 2);
  // Attempt 1 never stepped: the second failure in a row waits 1 s
  // (fault/restart_backoff.h).
  f_.clock.Advance(1000);
  Beat(w4, {});
  Beat(w1, {});
  f_.service->Tick();
  const control::JobInfo j = Job(a);
  ASSERT_EQ(j.state(), control::RUNNING) << j.message();
  EXPECT_EQ(Nodes(a), (std::vector<std::string>{w1, w4}));
  EXPECT_TRUE(HasEvent(a, "spare_used: node n3 replaced by spare n4"));
  EXPECT_FALSE(HasEvent(a, "replanned"));
}

TEST_F(SpareTest, WithoutAnIdleSpareTheJobReplansSmaller) {
  const std::string w1 = Register("n1"), w2 = Register("n2"),
                    w3 = Register("n3");
  const std::string a = Submit(Spec(2, 1, /*min_nodes=*/1));
  f_.service->Tick();
  const auto held1 = Running(Beat(w1, {}));
  Beat(w2, Running(Beat(w2, {})));
  // n2 and the spare n3 are lost together.
  Silence({{w1, held1}}, 4000);
  Beat(w1, {});
  f_.service->Tick();
  const control::JobInfo j = Job(a);
  ASSERT_EQ(j.state(), control::RUNNING) << j.message();
  EXPECT_EQ(Nodes(a), (std::vector<std::string>{w1}));
  EXPECT_EQ(j.plan().dp(), 1);
  EXPECT_TRUE(HasEvent(a, "replanned: tp=1 pp=1 dp=1 on 1 nodes"));
  EXPECT_FALSE(HasEvent(a, "spare_used"));
}

TEST_F(SpareTest, NegativeSparesAreRefused) {
  JobSpec spec = Spec(1, 0);
  spec.mutable_launch()->set_spares(-1);
  auto r = f_.jobs->Submit(spec);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("spares"), std::string::npos)
      << r.status();
}

}  // namespace
}  // namespace strata::coordinator
