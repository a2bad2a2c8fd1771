// JobManager and the job services with a fake clock over a real RocksDB:
// records survive a coordinator restart; placement waits for idle workers;
// launch orders carry the docs/placement.md environment; a failed rank or a
// lost worker restarts the job (re-planned on fewer nodes when allowed) up to
// max_restarts; every step is an event.
#include "coordinator/jobs/job_manager.h"

#include <gtest/gtest.h>

#include <map>

#include "tests/unit/coordinator/control_fixture.h"

namespace strata::coordinator {
namespace {

JobSpec Spec(const std::string& name, int nodes = 2, int rpn = 2) {
  JobSpec spec;
  spec.set_name(name);
  spec.mutable_launch()->add_command("/bin/true");
  spec.mutable_launch()->set_nodes(nodes);
  spec.mutable_launch()->set_ranks_per_node(rpn);
  spec.mutable_launch()->set_max_restarts(3);
  return spec;
}

class JobsTest : public ::testing::Test {
 protected:
  control::Reply Call(control::Request r) { return f_.service->Handle(r); }

  std::string Register(const std::string& node,
                       std::vector<control::RankReport> ranks = {}) {
    control::Request r;
    r.mutable_register_worker()->set_node_name(node);
    r.mutable_register_worker()->set_address("10.0.0." + node.substr(1));
    r.mutable_register_worker()->mutable_probe()->set_cpu_cores(8);
    r.mutable_register_worker()->mutable_probe()->set_memory_bytes(64LL << 30);
    for (auto& rr : ranks) *r.mutable_register_worker()->add_ranks() = rr;
    control::Reply reply = Call(r);
    EXPECT_EQ(reply.status().code(), 0) << reply.status().message();
    return reply.register_worker().worker_id();
  }

  // A heartbeat of worker `id` reporting `ranks`, to add steps or traces to.
  static control::Request Heartbeat(
      const std::string& id, const std::vector<control::RankReport>& ranks) {
    control::Request r;
    r.mutable_heartbeat()->set_worker_id(id);
    for (const auto& rr : ranks) *r.mutable_heartbeat()->add_ranks() = rr;
    return r;
  }

  // A heartbeat reporting `ranks`; returns the orders.
  control::HeartbeatReply Beat(const std::string& id,
                               const std::vector<control::RankReport>& ranks) {
    control::Reply reply = Call(Heartbeat(id, ranks));
    EXPECT_EQ(reply.status().code(), 0) << reply.status().message();
    return reply.heartbeat();
  }

  std::vector<control::RankLaunch> Launches(const std::string& id) {
    control::HeartbeatReply orders = Beat(id, {});
    return {orders.launch().begin(), orders.launch().end()};
  }

  static control::RankReport Running(const control::RankLaunch& l) {
    control::RankReport r;
    r.set_job_id(l.job_id());
    r.set_attempt(l.attempt());
    r.set_rank(l.rank());
    r.set_state(control::RANK_RUNNING);
    r.set_pid(1000 + l.rank());
    return r;
  }
  static control::RankReport Exited(control::RankReport r, int code,
                                    int sig = 0) {
    r.set_state(control::RANK_EXITED);
    r.set_exit_code(code);
    r.set_signal(sig);
    return r;
  }

  // `spec` submitted, placed on a new worker n1 and its ranks reported
  // running.
  struct Started {
    std::string job, worker;
    std::vector<control::RankReport> held;
  };
  Started Start(const JobSpec& spec) {
    Started s{.job = Submit(spec), .worker = Register("n1"), .held = {}};
    f_.service->Tick();
    for (const auto& l : Launches(s.worker)) s.held.push_back(Running(l));
    Beat(s.worker, s.held);
    return s;
  }

  std::string Submit(const JobSpec& spec) {
    control::Request r;
    *r.mutable_submit_job()->mutable_spec() = spec;
    control::Reply reply = Call(r);
    EXPECT_EQ(reply.status().code(), 0) << reply.status().message();
    return reply.submit_job().job_id();
  }

  control::JobInfo Job(const std::string& id) { return *f_.jobs->Get(id); }

  std::vector<std::string> EventKinds(const std::string& id) {
    std::vector<std::string> kinds;
    const control::EventsReply events = *f_.events->List(id, 0);
    for (const auto& e : events.events()) {
      kinds.push_back(e.kind());
    }
    return kinds;
  }

  ControlFixture f_;
};

TEST_F(JobsTest, JobsSurviveRestartAndIdsContinue) {
  EXPECT_EQ(Submit(Spec("a")), "job-1");
  EXPECT_EQ(Submit(Spec("b")), "job-2");
  f_.clock.Advance(500);
  ASSERT_TRUE(f_.jobs->Cancel("job-2").ok());
  EXPECT_EQ(f_.jobs->Cancel("job-2").status().code(),
            absl::StatusCode::kFailedPrecondition);
  f_.Restart();
  ASSERT_TRUE(f_.recovered.ok()) << f_.recovered;
  EXPECT_EQ(Job("job-1").state(), control::PENDING);
  EXPECT_EQ(Job("job-1").spec().launch().max_restarts(), 3);
  EXPECT_EQ(Job("job-2").state(), control::CANCELLED);
  EXPECT_EQ(Job("job-2").end_unix_ms(), 1'000'500);
  EXPECT_EQ(Submit(Spec("c")), "job-3");
  EXPECT_EQ(f_.jobs->List().jobs_size(), 3);
  EXPECT_EQ(EventKinds("job-2"),
            (std::vector<std::string>{"submitted", "cancelled"}));
}

TEST_F(JobsTest, RejectsBadSpecsAndUnknownJobs) {
  auto r = f_.jobs->Submit(JobSpec());
  EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(r.status().message().find("launch.command"), std::string::npos);
  JobSpec neg = Spec("n");
  neg.mutable_launch()->set_max_restarts(-1);
  EXPECT_EQ(f_.jobs->Submit(neg).status().code(),
            absl::StatusCode::kInvalidArgument);
  JobSpec min = Spec("m");
  min.mutable_launch()->set_min_nodes(3);
  EXPECT_EQ(f_.jobs->Submit(min).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(f_.jobs->Get("job-9").status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(f_.jobs->Cancel("job-9").status().code(),
            absl::StatusCode::kNotFound);
  control::Request logs;
  logs.mutable_logs()->set_job_id("../etc");
  EXPECT_NE(Call(logs).status().code(), 0);
}

TEST_F(JobsTest, SizesOverTheLimitsAreRefusedNamingTheFlag) {
  auto refused = [&](const JobSpec& spec, const std::string& flag) {
    control::Request r;
    *r.mutable_submit_job()->mutable_spec() = spec;
    control::Reply reply = Call(r);
    EXPECT_EQ(reply.status().code(),
              static_cast<int>(absl::StatusCode::kInvalidArgument))
        << flag;
    EXPECT_NE(reply.status().message().find(flag), std::string::npos)
        << reply.status().message();
  };
  refused(Spec("rpn", 1, 100000000), "--max-ranks-per-node");
  refused(Spec("nodes", 40000, 1), "--max-nodes");
  refused(Spec("world", 4096, 512), "--max-ranks");
  JobSpec cmd = Spec("cmd");
  cmd.mutable_launch()->add_command(std::string(70 << 10, 'x'));
  refused(cmd, "--max-command-bytes");
  JobSpec env = Spec("env");
  (*env.mutable_launch()->mutable_env())["BIG"] = std::string(70 << 10, 'x');
  refused(env, "--max-env-bytes");
  // Registered workers have 8 cores: 4 x 8 = 32 ranks per node at most.
  Register("n1");
  refused(Spec("cores", 1, 33), "--max-ranks-per-core");
  EXPECT_EQ(f_.jobs->List().jobs_size(), 0);
  auto ok = f_.jobs->Submit(Spec("fits", 1, 32), &f_.service->registry());
  EXPECT_TRUE(ok.ok()) << ok.status();
}

TEST_F(JobsTest, StoredJobOverTheLimitsIsFailedAtRecover) {
  control::JobInfo job;
  job.set_job_id("job-1");
  *job.mutable_spec() = Spec("huge", 1, 100000000);
  job.set_state(control::PENDING);
  ASSERT_TRUE(f_.store->Put("job/job-1", job.SerializeAsString()).ok());
  f_.Restart();
  ASSERT_TRUE(f_.recovered.ok()) << f_.recovered;
  auto got = f_.jobs->Get("job-1");
  ASSERT_TRUE(got.ok());
  EXPECT_EQ(got->state(), control::FAILED);
  EXPECT_NE(got->message().find("refused at coordinator start"),
            std::string::npos)
      << got->message();
  Register("n1");
  f_.service->Tick();  // nothing to place, nothing allocated
  EXPECT_EQ(f_.jobs->Get("job-1")->state(), control::FAILED);
}

TEST_F(JobsTest, CorruptRecordIsDataLoss) {
  ASSERT_TRUE(f_.store->Put("job/job-1", "\xff\xff\xff").ok());
  f_.Restart();
  EXPECT_EQ(f_.recovered.code(), absl::StatusCode::kDataLoss);
}

TEST_F(JobsTest, PlacesLaunchesWithRankEnvironmentAndSucceeds) {
  JobSpec spec = Spec("env");
  spec.mutable_constraints()->set_tp(2);
  spec.mutable_launch()->set_checkpoint_uri("rocksdb:///ckpt");
  (*spec.mutable_launch()->mutable_env())["USER_VAR"] = "x";
  const std::string id = Submit(spec);
  f_.service->Tick();
  EXPECT_EQ(Job(id).state(), control::PENDING);  // no workers yet
  std::string w0 = Register("n1"), w1 = Register("n2");
  f_.service->Tick();
  control::JobInfo job = Job(id);
  ASSERT_EQ(job.state(), control::RUNNING) << job.message();
  EXPECT_EQ(job.plan().tp(), 2);
  EXPECT_EQ(job.plan().dp(), 2);
  EXPECT_GT(job.master_port(), 0);

  std::map<int, control::RankLaunch> launches;
  std::map<std::string, std::vector<control::RankReport>> held;
  for (const auto& w : {w0, w1}) {
    for (const auto& l : Launches(w)) {
      launches[l.rank()] = l;
      held[w].push_back(Running(l));
    }
  }
  ASSERT_EQ(launches.size(), 4u);
  for (const auto& [rank, l] : launches) {
    const auto& env = l.env();
    EXPECT_EQ(env.at("RANK"), std::to_string(rank));
    EXPECT_EQ(env.at("LOCAL_RANK"), std::to_string(rank % 2));
    EXPECT_EQ(env.at("WORLD_SIZE"), "4");
    EXPECT_EQ(env.at("LOCAL_WORLD_SIZE"), "2");
    EXPECT_EQ(env.at("NODE_RANK"), std::to_string(rank / 2));
    EXPECT_EQ(env.at("GROUP_RANK"), std::to_string(rank / 2));
    EXPECT_EQ(env.at("MASTER_ADDR"), "10.0.0.1");
    EXPECT_EQ(env.at("MASTER_PORT"), std::to_string(job.master_port()));
    EXPECT_EQ(env.at("STRATA_JOB_ID"), id);
    EXPECT_EQ(env.at("STRATA_TP"), "2");
    EXPECT_EQ(env.at("STRATA_DP"), "2");
    EXPECT_EQ(env.at("STRATA_PP"), "1");
    EXPECT_EQ(env.at("STRATA_CP"), "1");
    EXPECT_EQ(env.at("STRATA_TP_RANK"), std::to_string(rank % 2));
    EXPECT_EQ(env.at("STRATA_DP_RANK"), std::to_string(rank / 2));
    EXPECT_EQ(env.at("STRATA_RESTART_COUNT"), "0");
    EXPECT_EQ(env.at("STRATA_CKPT_URI"), "rocksdb:///ckpt");
    EXPECT_EQ(env.at("USER_VAR"), "x");
    EXPECT_FALSE(l.plan_json().empty());
  }
  // Held ranks are not launched twice.
  EXPECT_EQ(Beat(w0, held[w0]).launch_size(), 0);
  for (auto& [w, ranks] : held) {
    for (auto& r : ranks) r = Exited(r, 0);
    EXPECT_EQ(Beat(w, ranks).stop_size(), 0);
  }
  EXPECT_EQ(Job(id).state(), control::SUCCEEDED);
  // The finished attempt is released: the next heartbeat stops it.
  EXPECT_EQ(Beat(w0, held[w0]).stop(0), id + "/0");
  EXPECT_EQ(EventKinds(id).back(), "succeeded");
}

TEST_F(JobsTest, FailedRankRestartsAttemptUntilMaxRestarts) {
  JobSpec spec = Spec("crash", 1, 2);
  spec.mutable_launch()->set_max_restarts(1);
  const std::string id = Submit(spec);
  std::string w = Register("n1");
  f_.service->Tick();
  std::vector<control::RankReport> held;
  for (const auto& l : Launches(w)) held.push_back(Running(l));
  ASSERT_EQ(held.size(), 2u);
  held[1] = Exited(held[1], 0, /*sig=*/9);
  control::HeartbeatReply orders = Beat(w, held);
  ASSERT_EQ(orders.stop_size(), 1);
  EXPECT_EQ(orders.stop(0), id + "/0");
  control::JobInfo job = Job(id);
  EXPECT_EQ(job.state(), control::PENDING);
  EXPECT_EQ(job.restart_count(), 1);
  EXPECT_NE(job.message().find("signal 9"), std::string::npos);
  // Not placed while the worker still holds the old attempt.
  f_.service->Tick();
  EXPECT_EQ(Job(id).state(), control::PENDING);
  Beat(w, {});  // old ranks stopped and forgotten
  f_.service->Tick();
  ASSERT_EQ(Job(id).state(), control::RUNNING);
  held.clear();
  for (const auto& l : Launches(w)) {
    EXPECT_EQ(l.attempt(), 1);
    EXPECT_EQ(l.env().at("STRATA_RESTART_COUNT"), "1");
    EXPECT_EQ(l.env().at("TORCHELASTIC_RESTART_COUNT"), "1");
    held.push_back(Running(l));
  }
  held[0] = Exited(held[0], 3);
  Beat(w, held);
  EXPECT_EQ(Job(id).state(), control::FAILED);
  EXPECT_NE(Job(id).message().find("no restarts left"), std::string::npos);
  EXPECT_EQ(EventKinds(id), (std::vector<std::string>{
                                "submitted", "launched", "rank_exited",
                                "attempt_failed", "restarting", "launched",
                                "rank_exited", "attempt_failed", "failed"}));
}

TEST_F(JobsTest, LostWorkerRestartsOnFewerNodesReplanned) {
  JobSpec spec = Spec("shrink", 2, 2);
  spec.mutable_launch()->set_min_nodes(1);
  spec.mutable_constraints()->set_tp(2);
  const std::string id = Submit(spec);
  std::string w0 = Register("n1"), w1 = Register("n2");
  f_.service->Tick();
  ASSERT_EQ(Job(id).plan().dp(), 2);
  std::vector<control::RankReport> held0;
  for (const auto& l : Launches(w0)) held0.push_back(Running(l));
  Beat(w1, {});
  // w1 goes silent; w0 keeps beating.
  for (int i = 0; i < 4; ++i) {
    f_.clock.Advance(1000);
    Beat(w0, held0);
    f_.service->Tick();
  }
  control::JobInfo job = Job(id);
  EXPECT_EQ(job.restart_count(), 1);
  EXPECT_NE(job.message().find("w-n2 lost"), std::string::npos);
  EXPECT_EQ(Beat(w0, held0).stop(0), id + "/0");
  Beat(w0, {});
  f_.service->Tick();
  job = Job(id);
  ASSERT_EQ(job.state(), control::RUNNING) << job.message();
  EXPECT_EQ(job.node_info_size(), 1);
  EXPECT_EQ(job.plan().tp(), 2);
  EXPECT_EQ(job.plan().dp(), 1);  // re-planned for 2 ranks
  EXPECT_EQ(Beat(w0, {}).launch_size(), 2);
}

TEST_F(JobsTest, FailsClearlyWhenWorkersNeverCome) {
  JobSpec spec = Spec("lonely", 3, 1);
  spec.mutable_launch()->set_worker_wait_s(5);
  const std::string id = Submit(spec);
  Register("n1");
  f_.service->Tick();
  EXPECT_EQ(Job(id).state(), control::PENDING);
  f_.clock.Advance(6000);
  Beat("w-n1", {});
  f_.service->Tick();
  control::JobInfo job = Job(id);
  EXPECT_EQ(job.state(), control::FAILED);
  EXPECT_NE(job.message().find("needs 3 idle workers"), std::string::npos)
      << job.message();
}

TEST_F(JobsTest, ImpossibleParallelismFailsNamingSizes) {
  JobSpec spec = Spec("bad", 1, 2);
  spec.mutable_constraints()->set_tp(4);
  const std::string id = Submit(spec);
  Register("n1");
  f_.service->Tick();
  EXPECT_EQ(Job(id).state(), control::FAILED);
  EXPECT_NE(Job(id).message().find("tp=4"), std::string::npos);
  EXPECT_NE(Job(id).message().find("2 ranks"), std::string::npos);
}

TEST_F(JobsTest, RunningJobIsReadoptedAfterCoordinatorRestart) {
  auto [id, w, held] = Start(Spec("readopt", 1, 2));
  f_.Restart();
  ASSERT_TRUE(f_.recovered.ok());
  EXPECT_EQ(Job(id).state(), control::RUNNING);
  // The worker's heartbeat is unknown, it re-registers with its ranks.
  EXPECT_TRUE(Beat(w, held).reregister());
  Register("n1", held);
  control::HeartbeatReply orders = Beat(w, held);
  EXPECT_EQ(orders.launch_size(), 0);
  EXPECT_EQ(orders.stop_size(), 0);
  f_.clock.Advance(5000);  // past the re-adoption window
  Beat(w, held);
  f_.service->Tick();
  EXPECT_EQ(Job(id).state(), control::RUNNING);
  for (auto& r : held) r = Exited(r, 0);
  Beat(w, held);
  EXPECT_EQ(Job(id).state(), control::SUCCEEDED);
}

// The goodput ledger is saved while the job runs and restored by the next
// coordinator: the accounting before the restart is kept (not start-up),
// and the steps after it go on counting as productive.
TEST_F(JobsTest, GoodputSurvivesCoordinatorRestart) {
  auto [id, w, held] = Start(Spec("goodput", 1, 2));
  f_.clock.Advance(3000);  // start-up
  auto steps = [&](int from, int to) {
    control::Request r = Heartbeat(w, held);
    for (int step = from; step <= to; ++step) {
      f_.clock.Advance(1000);
      control::StepReport* s = r.mutable_heartbeat()->add_steps();
      s->set_job_id(id);
      s->set_rank(0);
      s->set_step(step);
      s->set_step_seconds(1.0);
      s->set_unix_ms(f_.clock.NowMs());
    }
    EXPECT_EQ(Call(r).status().code(), 0);
  };
  steps(1, 10);
  for (int64_t ms = 0; ms < JobManager::kGoodputSaveIntervalMs; ms += 1000) {
    f_.clock.Advance(1000);
    Beat(w, held);
  }
  f_.service->Tick();  // saves
  const control::Goodput before = Job(id).goodput();
  EXPECT_NEAR(before.startup_s(), 3.0, 0.01);
  EXPECT_NEAR(before.productive_s(), 10.0 + 5.0, 0.01);

  f_.Restart();
  ASSERT_TRUE(f_.recovered.ok()) << f_.recovered;
  const control::Goodput after = Job(id).goodput();
  EXPECT_NEAR(after.wall_s(), before.wall_s(), 0.01);
  EXPECT_NEAR(after.startup_s(), before.startup_s(), 0.01);
  EXPECT_NEAR(after.productive_s(), before.productive_s(), 0.01);
  // The ranks trained on; their steps keep counting as productive.
  EXPECT_TRUE(Beat(w, held).reregister());
  Register("n1", held);
  steps(16, 20);
  for (auto& r : held) r = Exited(r, 0);
  Beat(w, held);
  ASSERT_EQ(Job(id).state(), control::SUCCEEDED);
  const control::Goodput end = Job(id).goodput();
  EXPECT_NEAR(end.startup_s(), 3.0, 0.01);
  EXPECT_NEAR(end.productive_s(), end.wall_s() - 3.0, 0.01);

  // A corrupt ledger record costs the accounting, not the job.
  ASSERT_TRUE(f_.store->Put("goodput/" + id, "\xff garbage").ok());
  f_.Restart();
  ASSERT_TRUE(f_.recovered.ok()) << f_.recovered;
  EXPECT_EQ(Job(id).state(), control::SUCCEEDED);
}

// `strata trace` (docs/observe.md "Traces"): every new request reads the
// flight recorders afresh, because records read for an earlier one end
// before the steps the job made since; `--last N` is pinned to the steps
// reported at the request; polls stay on their collection (or a newer one)
// for the collection window.
TEST_F(JobsTest, EveryTraceRequestReadsFreshRecordsForItsSteps) {
  auto [id, w, held] = Start(Spec("trace", 1, 2));
  const int attempt = held[0].attempt();
  // Steps from..to on both ranks, 1 s each; the clock ends at step `to`.
  auto steps = [&](int from, int to) {
    control::Request r = Heartbeat(w, held);
    for (int step = from; step <= to; ++step) {
      f_.clock.Advance(1000);
      for (int rank = 0; rank < 2; ++rank) {
        control::StepReport* s = r.mutable_heartbeat()->add_steps();
        s->set_job_id(id);
        s->set_rank(rank);
        s->set_step(step);
        s->set_step_seconds(1.0);
        s->set_unix_ms(f_.clock.NowMs());
      }
    }
    EXPECT_EQ(Call(r).status().code(), 0);
  };
  // The worker answers the order of `collection`: one all-reduce per
  // second of the last 30.
  auto answer = [&](int64_t collection) {
    control::Request r = Heartbeat(w, held);
    for (int rank = 0; rank < 2; ++rank) {
      control::RankTrace* t = r.mutable_heartbeat()->add_traces();
      t->set_job_id(id);
      t->set_attempt(attempt);
      t->set_rank(rank);
      t->set_collection(collection);
      for (int64_t ms = f_.clock.NowMs() - 30000; ms < f_.clock.NowMs();
           ms += 1000) {
        control::CollectiveRecord* op = t->add_ops();
        op->set_group("dp0");
        op->set_seq(static_cast<uint64_t>(ms / 1000));
        op->set_op("all_reduce");
        op->set_entered_us(ms * 1000 + 500000);
      }
    }
    EXPECT_EQ(Call(r).status().code(), 0);
  };
  auto trace = [&](int64_t collection, int64_t first, int64_t last) {
    control::Request r;
    r.mutable_trace()->set_job_id(id);
    r.mutable_trace()->set_newest_steps(5);
    r.mutable_trace()->set_collection(collection);
    r.mutable_trace()->set_first_step(first);
    r.mutable_trace()->set_last_step(last);
    control::Reply reply = Call(r);
    EXPECT_EQ(reply.status().code(), 0) << reply.status().message();
    return reply.trace();
  };
  // Records inside steps first..last of both ranks' windows.
  auto ops_in = [](const control::TraceReply& t) {
    size_t n = 0;
    for (const auto& c : t.collectives()) n += c.ops_size();
    return n;
  };

  steps(1, 10);
  control::TraceReply t = trace(0, 0, 0);
  EXPECT_EQ(t.collection(), 1);
  EXPECT_EQ(t.first_step(), 6);
  EXPECT_EQ(t.last_step(), 10);
  EXPECT_EQ(t.pending_size(), 2);
  control::HeartbeatReply orders = Beat(w, held);
  ASSERT_EQ(orders.trace_size(), 1);  // the order to read them
  EXPECT_EQ(orders.trace(0).collection(), 1);
  answer(1);
  steps(11, 12);  // the job goes on while the CLI polls
  t = trace(t.collection(), t.first_step(), t.last_step());
  EXPECT_EQ(t.collection(), 1);
  EXPECT_EQ(t.pending_size(), 0);
  EXPECT_EQ(t.steps_size(), 2 * 5);  // steps 6-10, not the newest
  EXPECT_EQ(ops_in(t), 2u * 5);

  // A second request: its steps (16-20) are newer than the records read
  // for the first, so it reads them afresh.
  steps(13, 20);
  t = trace(0, 0, 0);
  EXPECT_EQ(t.collection(), 2);
  EXPECT_EQ(t.first_step(), 16);
  EXPECT_EQ(t.last_step(), 20);
  EXPECT_EQ(t.pending_size(), 2);
  EXPECT_EQ(ops_in(t), 0u);
  // A poll of the older collection is served by the newer one.
  t = trace(1, 6, 10);
  EXPECT_EQ(t.collection(), 2);
  EXPECT_EQ(t.pending_size(), 2);
  answer(1);  // late, read for the first: not taken
  t = trace(2, 16, 20);
  EXPECT_EQ(t.pending_size(), 2);
  orders = Beat(w, held);
  ASSERT_EQ(orders.trace_size(), 1);
  EXPECT_EQ(orders.trace(0).collection(), 2);
  answer(2);
  t = trace(2, 16, 20);
  EXPECT_EQ(t.pending_size(), 0);
  EXPECT_EQ(ops_in(t), 2u * 5);

  // Past the collection window a poll starts afresh.
  f_.clock.Advance(11000);
  t = trace(2, 16, 20);
  EXPECT_EQ(t.collection(), 3);
  EXPECT_EQ(t.pending_size(), 2);
}

// The coordinator itself was stopped for 30 s (SIGSTOP): on resume the event
// loop reports the gap, and workers get a fresh window to report before any
// is declared lost; the running attempt stays.
TEST_F(JobsTest, PausedCoordinatorKeepsTheRunningAttempt) {
  const std::string id = Submit(Spec("pause", 2, 1));
  std::string w1 = Register("n1"), w2 = Register("n2");
  f_.service->Tick();
  std::vector<control::RankReport> held1, held2;
  for (const auto& l : Launches(w1)) held1.push_back(Running(l));
  for (const auto& l : Launches(w2)) held2.push_back(Running(l));
  Beat(w1, held1);
  Beat(w2, held2);
  f_.clock.Advance(30000);  // paused: nothing ran
  Beat(w1, held1);          // the first queued request is handled first
  f_.service->NoteLoopGap(30000);
  f_.service->Tick();
  EXPECT_EQ(Job(id).state(), control::RUNNING);
  f_.clock.Advance(2500);  // w2's next report comes within the window
  Beat(w1, held1);
  Beat(w2, held2);
  f_.service->Tick();
  control::JobInfo job = Job(id);
  EXPECT_EQ(job.state(), control::RUNNING) << job.message();
  EXPECT_EQ(job.restart_count(), 0);
  EXPECT_EQ(f_.service->registry().AliveCount(), 2);
  // A worker that stays silent after the window is lost as usual.
  f_.clock.Advance(1000);
  Beat(w1, held1);
  f_.clock.Advance(2600);
  Beat(w1, held1);
  f_.service->Tick();
  EXPECT_EQ(Job(id).restart_count(), 1);
  EXPECT_NE(Job(id).message().find("w-n2 lost"), std::string::npos);
}

// A short gap (the loop was merely busy) changes nothing; a wall-clock jump
// (the date was set an hour ahead) loses nobody: liveness is steady time.
TEST_F(JobsTest, WallClockJumpLosesNoWorker) {
  auto [id, w, held] = Start(Spec("jump", 1, 1));
  f_.clock.AdvanceWall(3600 * 1000);
  f_.clock.Advance(500);
  f_.service->NoteLoopGap(500);
  f_.service->Tick();
  EXPECT_EQ(Job(id).state(), control::RUNNING);
  EXPECT_EQ(f_.service->registry().AliveCount(), 1);
}

// A pending job's wait for workers is steady time too: the date set an hour
// ahead does not fail it for lack of workers.
TEST_F(JobsTest, WallClockJumpDoesNotFailAPendingJob) {
  const std::string id = Submit(Spec("waiting", 2, 1));
  Register("n1");  // one of the two workers it needs
  f_.service->Tick();
  f_.clock.Advance(5000);  // past the registry's settling window
  f_.service->Tick();
  EXPECT_EQ(Job(id).state(), control::PENDING);
  f_.clock.AdvanceWall(3600 * 1000);
  f_.clock.Advance(500);
  f_.service->NoteLoopGap(500);
  f_.service->Tick();
  EXPECT_EQ(Job(id).state(), control::PENDING) << Job(id).message();
}

TEST_F(JobsTest, LogsAreStoredMergedAndPerRank) {
  const std::string id = Submit(Spec("logs", 1, 2));
  std::string w = Register("n1");
  f_.service->Tick();
  Beat(w, {});
  control::Request r;
  r.mutable_heartbeat()->set_worker_id(w);
  auto* c = r.mutable_heartbeat()->add_logs();
  c->set_job_id(id);
  c->set_rank(1);
  c->set_data("hello\nworld\n");
  Call(r);
  control::Request lr;
  lr.mutable_logs()->set_job_id(id);
  lr.mutable_logs()->set_rank(-1);
  control::Reply all = Call(lr);
  EXPECT_EQ(all.logs().data(), "[rank 1] hello\n[rank 1] world\n");
  EXPECT_FALSE(all.logs().finished());
  lr.mutable_logs()->set_rank(1);
  lr.mutable_logs()->set_offset(-6);
  EXPECT_EQ(Call(lr).logs().data(), "world\n");
}

}  // namespace
}  // namespace strata::coordinator
