// Runs short jobs through a ControlFixture's Service the way a worker would:
// a fake worker registers, takes launch orders from heartbeat replies,
// reports its ranks running (rank 0 with one step report) and exited. For
// tests of what a coordinator keeps per job.
#pragma once

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "tests/unit/coordinator/control_fixture.h"

namespace strata::coordinator {

class JobDriver {
 public:
  // `f` must outlive the driver; registers worker "n1".
  explicit JobDriver(ControlFixture* f) : f_(f) {
    control::Request r;
    r.mutable_register_worker()->set_node_name("n1");
    r.mutable_register_worker()->set_address("10.0.0.1");
    r.mutable_register_worker()->mutable_probe()->set_cpu_cores(8);
    r.mutable_register_worker()->mutable_probe()->set_memory_bytes(64LL << 30);
    control::Reply reply = f_->service->Handle(r);
    EXPECT_EQ(reply.status().code(), 0) << reply.status().message();
    worker_ = reply.register_worker().worker_id();
  }

  const std::string& worker() const { return worker_; }

  // A one-rank /bin/true job; its id.
  std::string Submit() {
    control::Request r;
    JobSpec* spec = r.mutable_submit_job()->mutable_spec();
    spec->set_name("short");
    spec->mutable_launch()->add_command("/bin/true");
    spec->mutable_launch()->set_nodes(1);
    spec->mutable_launch()->set_ranks_per_node(1);
    control::Reply reply = f_->service->Handle(r);
    EXPECT_EQ(reply.status().code(), 0) << reply.status().message();
    return reply.submit_job().job_id();
  }

  // Submits a job and runs it on the worker until its ranks exited with
  // `exit_code`; the job's state then.
  control::JobState RunOne(int exit_code = 0) {
    const std::string id = Submit();
    f_->service->Tick();
    std::vector<control::RankReport> held;
    const control::HeartbeatReply orders = Beat({});
    for (const auto& l : orders.launch()) {
      control::RankReport r;
      r.set_job_id(l.job_id());
      r.set_attempt(l.attempt());
      r.set_rank(l.rank());
      r.set_state(control::RANK_RUNNING);
      r.set_pid(1000 + l.rank());
      held.push_back(r);
    }
    EXPECT_FALSE(held.empty()) << id << " was not launched";
    f_->clock.Advance(10);
    Beat(held, /*with_step=*/true);
    f_->clock.Advance(10);
    for (auto& r : held) {
      r.set_state(control::RANK_EXITED);
      r.set_exit_code(exit_code);
    }
    Beat(held);
    Beat({});  // the worker holds nothing any more
    return f_->jobs->Get(id)->state();
  }

 private:
  control::HeartbeatReply Beat(const std::vector<control::RankReport>& ranks,
                               bool with_step = false) {
    control::Request r;
    control::HeartbeatRequest* hb = r.mutable_heartbeat();
    hb->set_worker_id(worker_);
    for (const auto& rr : ranks) {
      *hb->add_ranks() = rr;
      if (!with_step || rr.rank() != 0) continue;
      control::StepReport* s = hb->add_steps();
      s->set_job_id(rr.job_id());
      s->set_rank(0);
      s->set_step(1);
      s->set_total_steps(1);
      s->set_step_seconds(0.01);
      s->set_unix_ms(f_->clock.NowMs());
    }
    control::Reply reply = f_->service->Handle(r);
    EXPECT_EQ(reply.status().code(), 0) << reply.status().message();
    return reply.heartbeat();
  }

  ControlFixture* f_;
  std::string worker_;
};

}  // namespace strata::coordinator
