// Multi-process control-plane tests ("Tests"): a real coordinator
// and workers on this host run real rank processes.
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <thread>

#include "absl/strings/str_split.h"
#include "control/kv_client.h"
#include "tests/integration/cli/run_command.h"
#include "tests/integration/control/local_cluster.h"

namespace strata::testing {
namespace {

using std::chrono::seconds;

JobSpec ShellJob(const std::string& script, int nodes, int rpn) {
  JobSpec spec;
  spec.set_name("test");
  auto* l = spec.mutable_launch();
  l->add_command("/bin/sh");
  l->add_command("-c");
  l->add_command(script);
  l->set_nodes(nodes);
  l->set_ranks_per_node(rpn);
  l->set_worker_wait_s(20);
  l->set_stop_grace_ms(500);
  return spec;
}

std::map<std::string, std::string> ParseEnv(const std::string& out) {
  std::map<std::string, std::string> env;
  for (absl::string_view line : absl::StrSplit(out, '\n')) {
    if (!absl::ConsumePrefix(&line, "ENV ")) continue;
    size_t eq = line.find('=');
    if (eq != absl::string_view::npos) {
      env[std::string(line.substr(0, eq))] = std::string(line.substr(eq + 1));
    }
  }
  return env;
}

// 2 nodes x 2 ranks whose ranks print their environment: every
// docs/placement.md variable, field by field.
TEST(JobLifecycleTest, TwoByTwoRanksGetTheEnvironmentContract) {
  LocalCluster cluster(2);
  JobSpec spec = ShellJob(
      "env | grep -E '^(RANK|LOCAL_RANK|WORLD_SIZE|LOCAL_WORLD_SIZE|"
      "GROUP_RANK|NODE_RANK|MASTER_ADDR|MASTER_PORT|STRATA_[A-Z_]*)=' | "
      "sed 's/^/ENV /'; test -s \"$STRATA_PLAN\" && echo ENV PLAN_FILE=ok",
      2, 2);
  spec.mutable_constraints()->set_tp(2);
  spec.mutable_launch()->set_checkpoint_uri("rocksdb:///tmp/ckpt");
  auto id = cluster.Submit(spec);
  ASSERT_TRUE(id.ok()) << id.status();
  auto job = cluster.WaitEnded(*id, seconds(30));
  ASSERT_TRUE(job.ok()) << job.status();
  ASSERT_EQ(job->state(), control::SUCCEEDED) << job->message();
  std::string master_port;
  for (int rank = 0; rank < 4; ++rank) {
    auto env = ParseEnv(cluster.Logs(*id, rank));
    SCOPED_TRACE("rank " + std::to_string(rank));
    EXPECT_EQ(env["RANK"], std::to_string(rank));
    EXPECT_EQ(env["LOCAL_RANK"], std::to_string(rank % 2));
    EXPECT_EQ(env["WORLD_SIZE"], "4");
    EXPECT_EQ(env["LOCAL_WORLD_SIZE"], "2");
    EXPECT_EQ(env["GROUP_RANK"], std::to_string(rank / 2));
    EXPECT_EQ(env["NODE_RANK"], std::to_string(rank / 2));
    EXPECT_EQ(env["MASTER_ADDR"], "127.0.0.1");
    EXPECT_GT(std::atoi(env["MASTER_PORT"].c_str()), 0);
    if (rank == 0) master_port = env["MASTER_PORT"];
    EXPECT_EQ(env["MASTER_PORT"], master_port);
    EXPECT_EQ(env["STRATA_JOB_ID"], *id);
    EXPECT_EQ(env["STRATA_STORE"], cluster.endpoint());
    EXPECT_EQ(env["PLAN_FILE"], "ok");
    EXPECT_EQ(env["STRATA_TP"], "2");
    EXPECT_EQ(env["STRATA_PP"], "1");
    EXPECT_EQ(env["STRATA_DP"], "2");
    EXPECT_EQ(env["STRATA_CP"], "1");
    EXPECT_EQ(env["STRATA_TP_RANK"], std::to_string(rank % 2));
    EXPECT_EQ(env["STRATA_DP_RANK"], std::to_string(rank / 2));
    EXPECT_EQ(env["STRATA_PP_RANK"], "0");
    EXPECT_EQ(env["STRATA_CP_RANK"], "0");
    EXPECT_EQ(env["STRATA_RESTART_COUNT"], "0");
    EXPECT_EQ(env["STRATA_CKPT_URI"], "rocksdb:///tmp/ckpt");
    EXPECT_TRUE(env["STRATA_TELEMETRY"].starts_with("ipc://"));
    EXPECT_EQ(env["STRATA_NODE_ADDR"], "127.0.0.1");
    EXPECT_EQ(env["STRATA_NODE_NAME"], "node-" + std::to_string(rank / 2));
  }
}

// SIGKILL one rank of the first attempt: the job restarts with
// STRATA_RESTART_COUNT=1 and completes.
TEST(JobLifecycleTest, SigkilledRankRestartsTheJob) {
  LocalCluster cluster(2);
  JobSpec spec = ShellJob(
      "if [ \"$STRATA_RESTART_COUNT\" = 0 ] && [ \"$RANK\" = 1 ]; then "
      "kill -9 $$; fi; sleep 0.3; echo attempt=$STRATA_RESTART_COUNT",
      2, 1);
  spec.mutable_launch()->set_max_restarts(2);
  auto id = cluster.Submit(spec);
  ASSERT_TRUE(id.ok());
  auto job = cluster.WaitEnded(*id, seconds(30));
  ASSERT_TRUE(job.ok()) << job.status();
  EXPECT_EQ(job->state(), control::SUCCEEDED) << job->message();
  std::string events;
  for (const auto& e : cluster.Events(*id)) {
    events += e.kind() + ": " + e.message() + "\n";
  }
  EXPECT_EQ(job->restart_count(), 1) << events;
  EXPECT_NE(cluster.Logs(*id, 0).find("attempt=1"), std::string::npos);
  bool saw_signal = false;
  for (const auto& e : cluster.Events(*id)) {
    if (e.kind() == "attempt_failed" &&
        e.message().find("signal 9") != std::string::npos) {
      saw_signal = true;
    }
  }
  EXPECT_TRUE(saw_signal);
}

// SIGKILL the coordinator while the job runs and start it again on the same
// state: the job is still listed, its ranks are re-adopted and it completes.
TEST(JobLifecycleTest, CoordinatorSigkillRunningJobCompletes) {
  LocalCluster cluster(2);
  auto id = cluster.Submit(ShellJob("sleep 3; echo finished", 2, 1));
  ASSERT_TRUE(id.ok());
  auto running = cluster.WaitFor(
      *id,
      [](const control::JobInfo& j) {
        return j.ranks_size() == 2 &&
               j.ranks(0).state() == control::RANK_RUNNING &&
               j.ranks(1).state() == control::RANK_RUNNING;
      },
      seconds(20));
  ASSERT_TRUE(running.ok()) << running.status();
  cluster.KillCoordinator();
  cluster.StartCoordinator();
  auto job = cluster.WaitEnded(*id, seconds(30));
  ASSERT_TRUE(job.ok()) << job.status();
  EXPECT_EQ(job->state(), control::SUCCEEDED) << job->message();
  EXPECT_EQ(job->restart_count(), 0);  // the same ranks finished
  EXPECT_NE(cluster.Logs(*id, -1).find("[rank 1] finished"), std::string::npos);
}

// Cancel stops running ranks (SIGTERM; SIGKILL after the grace period).
TEST(JobLifecycleTest, CancelStopsRanks) {
  LocalCluster cluster(1);
  auto id = cluster.Submit(
      ShellJob("trap '' TERM; echo started; sleep 60", 1, 1));  // ignores TERM
  ASSERT_TRUE(id.ok());
  auto started = cluster.WaitFor(
      *id,
      [](const control::JobInfo& j) {
        return j.ranks_size() == 1 && j.ranks(0).pid() > 0;
      },
      seconds(20));
  ASSERT_TRUE(started.ok());
  const pid_t pid = started->ranks(0).pid();
  control::Request cancel;
  cancel.mutable_cancel_job()->set_job_id(*id);
  ASSERT_TRUE(cluster.Call(cancel).ok());
  bool gone = false;
  for (int i = 0; i < 100 && !gone; ++i) {  // grace 500 ms + slack
    gone = kill(pid, 0) != 0;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  EXPECT_TRUE(gone) << "rank pid " << pid << " still alive after cancel";
  auto cancelled = cluster.JobStatus(*id);
  ASSERT_TRUE(cancelled.ok()) << cancelled.status();
  EXPECT_EQ(cancelled->state(), control::CANCELLED);
}

// The rendezvous KV as ranks see it (comm::Store over the coordinator).
TEST(JobLifecycleTest, CoordinatorStoreSetGetWaitAdd) {
  LocalCluster cluster(0);
  auto store = control::ConnectCoordinatorStore(cluster.endpoint());
  ASSERT_TRUE(store.ok());
  ASSERT_TRUE(cluster.Call(control::Request()).status().code() ==
              absl::StatusCode::kInvalidArgument);  // up and rejecting
  std::thread setter([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
    ASSERT_TRUE((*store)->Set("job-1/0/addr", "10.0.0.1:5").ok());
  });
  auto v = (*store)->Get("job-1/0/addr", std::chrono::seconds(10));
  setter.join();
  ASSERT_TRUE(v.ok()) << v.status();
  EXPECT_EQ(*v, "10.0.0.1:5");
  EXPECT_EQ(*(*store)->Add("job-1/0/count", 2), 2);
  EXPECT_EQ(*(*store)->Add("job-1/0/count", 3), 5);
  auto missing =
      (*store)->Wait({"job-1/0/addr", "nope"}, std::chrono::milliseconds(200));
  EXPECT_EQ(missing.code(), absl::StatusCode::kDeadlineExceeded);
  EXPECT_NE(missing.message().find("nope"), std::string::npos);
  EXPECT_TRUE(*(*store)->Check("job-1/0/addr"));
  ASSERT_TRUE((*store)->Delete("job-1/0/addr").ok());
  EXPECT_FALSE(*(*store)->Check("job-1/0/addr"));
}

// `strata run` runs an unmodified torch.distributed script (env://, gloo)
// on 2 local nodes x 2 ranks, as torchrun would.
TEST(JobLifecycleTest, StrataRunRunsTorchDistributedScript) {
  if (std::system("/usr/bin/python3 -c 'import torch.distributed' "
                  ">/dev/null 2>&1") != 0) {
    GTEST_SKIP() << "python3-torch is not installed";
  }
  const char* src = std::getenv("STRATA_SOURCE_DIR");
  ASSERT_NE(src, nullptr);
  RunResult run = RunStrata(
      std::string("run --nodes 2 --ranks-per-node 2 -- /usr/bin/python3 ") +
      src + "/tests/integration/control/scripts/torch_allreduce.py");
  const std::string& text = run.out;
  ASSERT_EQ(run.code, 0) << text;
  for (int r = 0; r < 4; ++r) {
    EXPECT_NE(text.find("torch rank=" + std::to_string(r) +
                        " world=4 local_rank=" + std::to_string(r % 2) +
                        " allreduce=10 ok"),
              std::string::npos)
        << text;
  }
}

// A failing command makes `strata run` exit non-zero with the reason.
TEST(JobLifecycleTest, StrataRunPropagatesFailure) {
  RunResult r = RunStrata("run --nodes 1 -- /bin/sh -c 'exit 7'");
  EXPECT_EQ(r.code, 1) << r.out;
  EXPECT_NE(r.out.find("exited with code 7"), std::string::npos) << r.out;
  r = RunStrata("run --nodes 1 -- /nonexistent/program");
  EXPECT_EQ(r.code, 1) << r.out;
  EXPECT_NE(r.out.find("No such file"), std::string::npos) << r.out;
}

}  // namespace
}  // namespace strata::testing
