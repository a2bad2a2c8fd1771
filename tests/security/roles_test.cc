// Finding 1 of issue 30 ("any CURVE key is an admin key"): each role can do
// what docs/security.md says and nothing more. Requests go through
// Service::Handle with the identity RouterServer would attach; the identity
// itself comes from ZAP (zap_handler_test and curve_roles_test check that
// part over real CURVE sockets).
#include <gtest/gtest.h>

#include "coordinator/security/access_policy.h"
#include "tests/security/security_fixture.h"

namespace strata::coordinator {
namespace {

class RolesTest : public SecurityTest {};

// The attack: a rank of job 3 lists every job, changes job 1's fault policy,
// cancels job 2 and registers a worker for node dn1 (issue 30, finding 1).
TEST_F(RolesTest, RankKeyOpensOnlyItsAttemptsKv) {
  Register("dn1");
  const std::string job1 = Submit("alice");
  const std::string job2 = Submit("bob");
  const std::string job3 = Submit("carol");
  f_.service->Tick();
  std::vector<control::RankReport> held;
  Beat("dn1", &held);
  const Identity rank = RankOf(job1, Job(job1).attempt(), 0);
  const Identity other = RankOf(job3, 0, 0);

  control::Request list;
  list.mutable_list_jobs();
  EXPECT_EQ(Code(Call(list, other)), kDenied);
  control::Request fault;
  fault.mutable_fault_set()->set_job_id(job1);
  fault.mutable_fault_set()->add_settings("straggler=evict");
  control::Reply denied = Call(fault, other);
  EXPECT_EQ(Code(denied), kDenied);
  EXPECT_NE(denied.status().message().find("rank 0 of " + job3),
            std::string::npos)
      << denied.status().message();
  control::Request cancel;
  cancel.mutable_cancel_job()->set_job_id(job2);
  EXPECT_EQ(Code(Call(cancel, other)), kDenied);
  control::Request reg;
  reg.mutable_register_worker()->set_node_name("dn1");
  EXPECT_EQ(Code(Call(reg, other)), kDenied);
  EXPECT_EQ(Job(job2).state(), control::PENDING);
  EXPECT_GE(f_.service->denied(), 4u);

  // Its own attempt's namespace works; another job's or attempt's does not.
  control::Request set;
  set.mutable_kv_set()->set_key(job1 + "/0/rendezvous/x");
  set.mutable_kv_set()->set_value("v");
  EXPECT_EQ(Code(Call(set, rank)), 0);
  set.mutable_kv_set()->set_key(job3 + "/0/rendezvous/x");
  EXPECT_EQ(Code(Call(set, rank)), kDenied);
  set.mutable_kv_set()->set_key(job1 + "/0/rendezvous/x");
  EXPECT_EQ(Code(Call(set, RankOf(job1, 7, 0))), kDenied);  // stale attempt
}

TEST_F(RolesTest, UsersActOnlyOnTheirOwnJobs) {
  const std::string mine = Submit("alice");
  const std::string theirs = Submit("bob");
  EXPECT_EQ(Job(mine).owner(), "alice");
  control::Request cancel;
  cancel.mutable_cancel_job()->set_job_id(theirs);
  control::Reply r = Call(cancel, Who(Role::kUser, "alice"));
  EXPECT_EQ(Code(r), kDenied);
  EXPECT_NE(r.status().message().find("not a job of theirs"),
            std::string::npos);
  EXPECT_EQ(Job(theirs).state(), control::PENDING);
  control::Request events;
  events.mutable_events();
  EXPECT_EQ(Code(Call(events, Who(Role::kUser, "alice"))), kDenied);

  control::Request list;
  list.mutable_list_jobs();
  control::Reply listed = Call(list, Who(Role::kUser, "alice"));
  ASSERT_EQ(listed.jobs().jobs_size(), 1);
  EXPECT_EQ(listed.jobs().jobs(0).job_id(), mine);
  EXPECT_EQ(Call(list, Who(Role::kAdmin, "root")).jobs().jobs_size(), 2);

  cancel.mutable_cancel_job()->set_job_id(mine);
  EXPECT_EQ(Code(Call(cancel, Who(Role::kUser, "alice"))), 0);
  cancel.mutable_cancel_job()->set_job_id(theirs);
  EXPECT_EQ(Code(Call(cancel, Who(Role::kAdmin, "root"))), 0);
  // Users run no worker.
  control::Request reg;
  reg.mutable_register_worker()->set_node_name("dn1");
  EXPECT_EQ(Code(Call(reg, Who(Role::kUser, "alice"))), kDenied);
}

// A worker key is bound to its node: it cannot register or heartbeat as
// another, so it never receives another node's launch orders.
TEST_F(RolesTest, WorkerKeyIsBoundToItsNode) {
  Register("dn1");
  const std::string job = Submit("alice");
  f_.service->Tick();
  control::Request reg;
  reg.mutable_register_worker()->set_node_name("dn1");
  control::Reply r = Call(reg, Who(Role::kWorker, "dn2"));
  EXPECT_EQ(Code(r), kDenied);
  EXPECT_NE(r.status().message().find("bound to node 'dn2'"),
            std::string::npos);
  r = Call(Heartbeat("w-dn1"), Who(Role::kWorker, "dn2"));
  EXPECT_EQ(Code(r), kDenied);
  EXPECT_EQ(r.heartbeat().launch_size(), 0);
  control::Request list;
  list.mutable_list_jobs();
  EXPECT_EQ(Code(Call(list, Who(Role::kWorker, "dn1"))), kDenied);
  // The honest worker gets its orders.
  std::vector<control::RankReport> held;
  EXPECT_EQ(Beat("dn1", &held).launch_size(), 1);
  EXPECT_EQ(Job(job).state(), control::RUNNING);
}

// Even with dn1's own key, a second process cannot take over a live dn1:
// the job there runs on (issue 30: "job 1 lost 4 attempts in 1.2 s").
TEST_F(RolesTest, SecondRegistrationForLiveNodeIsRefused) {
  Register("dn1", "first");
  const std::string job = Submit("alice");
  f_.service->Tick();
  std::vector<control::RankReport> held;
  Beat("dn1", &held);
  control::Request reg;
  reg.mutable_register_worker()->set_node_name("dn1");
  reg.mutable_register_worker()->set_incarnation("impostor");
  control::Reply r = Call(reg, Who(Role::kWorker, "dn1"));
  EXPECT_EQ(Code(r), static_cast<int>(absl::StatusCode::kAlreadyExists));
  EXPECT_NE(r.status().message().find("already has a live worker"),
            std::string::npos);
  Beat("dn1", &held);
  EXPECT_EQ(Job(job).state(), control::RUNNING);
  EXPECT_EQ(Job(job).restart_count(), 0);
  // The same worker again (a lost reply) is fine; once dn1 is lost a new
  // one may take the node.
  Register("dn1", "first");
  f_.clock.Advance(4000);
  f_.service->Tick();
  Register("dn1", "second");
}

TEST_F(RolesTest, NodeNamesAreValidated) {
  for (const std::string& bad :
       std::vector<std::string>{"../x", "a b", "-x", "", std::string(64, 'a'),
                                "dn1/evil"}) {
    control::Request reg;
    reg.mutable_register_worker()->set_node_name(bad);
    EXPECT_EQ(Code(Call(reg, Who(Role::kAdmin, "root"))),
              static_cast<int>(absl::StatusCode::kInvalidArgument))
        << bad;
  }
}

TEST(IdentityTest, ZapUserIdRoundTrips) {
  for (const Identity& who :
       {Who(Role::kAdmin, "ops"), Who(Role::kUser, "alice"),
        Who(Role::kWorker, "dn1"), RankOf("job-3", 2, 7)}) {
    auto back = ParseZapUserId(ZapUserId(who));
    ASSERT_TRUE(back.ok()) << back.status();
    EXPECT_EQ(ZapUserId(*back), ZapUserId(who));
  }
  EXPECT_FALSE(ParseZapUserId("").ok());
  EXPECT_FALSE(ParseZapUserId("root").ok());
  EXPECT_FALSE(ParseZapUserId("rank:job-1/x/0").ok());
}

}  // namespace
}  // namespace strata::coordinator
