// Shared by the security regression tests (docs/security.md): a coordinator's
// services over a real RocksDB (ControlFixture) with identities, and helpers
// that submit jobs as a user and run them on workers of given nodes.
#pragma once

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "coordinator/security/identity.h"
#include "tests/unit/coordinator/control_fixture.h"

namespace strata::coordinator {

inline Identity Who(Role role, const std::string& name) {
  Identity who;
  who.role = role;
  who.name = name;
  return who;
}

inline Identity RankOf(const std::string& job, int attempt, int rank) {
  Identity who;
  who.role = Role::kRank;
  who.job_id = job;
  who.attempt = attempt;
  who.rank = rank;
  return who;
}

class SecurityTest : public ::testing::Test {
 protected:
  control::Reply Call(const control::Request& r, const Identity& who) {
    return f_.service->Handle(r, who);
  }
  static int Code(const control::Reply& r) { return r.status().code(); }
  static constexpr int kDenied =
      static_cast<int>(absl::StatusCode::kPermissionDenied);

  std::string Register(const std::string& node,
                       const std::string& incarnation = "one") {
    control::Request r;
    r.mutable_register_worker()->set_node_name(node);
    r.mutable_register_worker()->set_incarnation(incarnation);
    r.mutable_register_worker()->mutable_probe()->set_cpu_cores(8);
    r.mutable_register_worker()->mutable_probe()->set_memory_bytes(64LL << 30);
    control::Reply reply = Call(r, Who(Role::kWorker, node));
    EXPECT_EQ(Code(reply), 0) << reply.status().message();
    return reply.register_worker().worker_id();
  }
  std::string Submit(const std::string& user, int nodes = 1, int rpn = 1) {
    control::Request r;
    JobSpec* spec = r.mutable_submit_job()->mutable_spec();
    spec->set_name("j");
    spec->mutable_launch()->add_command("/bin/true");
    spec->mutable_launch()->set_nodes(nodes);
    spec->mutable_launch()->set_ranks_per_node(rpn);
    spec->mutable_launch()->set_max_restarts(3);
    control::Reply reply = Call(r, Who(Role::kUser, user));
    EXPECT_EQ(Code(reply), 0) << reply.status().message();
    return reply.submit_job().job_id();
  }
  static control::Request Heartbeat(const std::string& worker) {
    control::Request r;
    r.mutable_heartbeat()->set_worker_id(worker);
    return r;
  }
  // Heartbeats `worker` (as node `node`) reporting `held`; returns orders.
  control::HeartbeatReply Beat(const std::string& node,
                               std::vector<control::RankReport>* held) {
    control::Request r = Heartbeat("w-" + node);
    for (const auto& h : *held) *r.mutable_heartbeat()->add_ranks() = h;
    control::Reply reply = Call(r, Who(Role::kWorker, node));
    EXPECT_EQ(Code(reply), 0) << reply.status().message();
    for (const auto& l : reply.heartbeat().launch()) {
      control::RankReport rr;
      rr.set_job_id(l.job_id());
      rr.set_attempt(l.attempt());
      rr.set_rank(l.rank());
      rr.set_state(control::RANK_RUNNING);
      rr.set_pid(1000 + l.rank());
      held->push_back(rr);
    }
    return reply.heartbeat();
  }
  control::JobInfo Job(const std::string& id) { return *f_.jobs->Get(id); }

  ControlFixture f_;
};

}  // namespace strata::coordinator
