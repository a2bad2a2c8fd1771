// A coordinator outage longer than the workers' old 10 s limit must not stop
// the cluster: a real coordinator and two workers run a 2-rank job, the
// coordinator is paused (SIGSTOP ... SIGCONT) or paused and then replaced by
// a new process on the same state directory, and the same rank processes
// (same PIDs) must finish, the job SUCCEEDED in its first attempt. Prints the
// time from the coordinator's return to both workers being heard again.
#include <gtest/gtest.h>
#include <signal.h>

#include <chrono>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <thread>

#include "tests/integration/control/local_cluster.h"

namespace strata::testing {
namespace {

using std::chrono::milliseconds;
using std::chrono::seconds;
using SteadyClock = std::chrono::steady_clock;

// Longer than the 10 s after which workers used to stop their ranks;
// STRATA_FAULT_PAUSE_MS overrides it (e.g. 30000 to measure a longer pause).
const milliseconds kOutage = [] {
  const char* ms = std::getenv("STRATA_FAULT_PAUSE_MS");
  return milliseconds(ms != nullptr ? std::atoi(ms) : 11000);
}();

JobSpec SleepJob(int seconds_to_run, int max_restarts = 0) {
  JobSpec spec;
  spec.set_name("pause");
  auto* l = spec.mutable_launch();
  l->add_command("/bin/sh");
  l->add_command("-c");
  l->add_command("echo started $$; sleep " + std::to_string(seconds_to_run) +
                 "; echo finished");
  l->set_nodes(2);
  l->set_ranks_per_node(1);
  l->set_worker_wait_s(20);
  l->set_stop_grace_ms(500);
  l->set_max_restarts(max_restarts);
  return spec;
}

// Runs the job until both ranks run; returns their PIDs.
std::vector<int> StartJob(
    LocalCluster& cluster, std::string* id,
    const JobSpec& spec = SleepJob(kOutage.count() / 1000 + 4)) {
  auto submitted = cluster.Submit(spec);
  EXPECT_TRUE(submitted.ok()) << submitted.status();
  if (!submitted.ok()) return {};
  *id = *submitted;
  auto running = cluster.WaitFor(
      *id,
      [](const control::JobInfo& j) {
        return j.ranks_size() == 2 &&
               j.ranks(0).state() == control::RANK_RUNNING &&
               j.ranks(1).state() == control::RANK_RUNNING;
      },
      seconds(20));
  EXPECT_TRUE(running.ok()) << running.status();
  if (!running.ok()) return {};
  return {running->ranks(0).pid(), running->ranks(1).pid()};
}

// Milliseconds until every worker is listed alive with a heartbeat taken
// after `since_unix_ms` (wall time of the coordinator's return).
int64_t MsUntilWorkersHeard(LocalCluster& cluster, int64_t since_unix_ms,
                            int workers) {
  const auto t0 = SteadyClock::now();
  while (SteadyClock::now() - t0 < seconds(10)) {
    control::Request req;
    req.mutable_list_workers();
    auto reply = cluster.Call(req);
    int heard = 0;
    if (reply.ok()) {
      for (const auto& w : reply->list_workers().workers()) {
        heard += w.alive() && w.last_heartbeat_unix_ms() >= since_unix_ms;
      }
    }
    if (heard == workers) {
      return std::chrono::duration_cast<milliseconds>(SteadyClock::now() - t0)
          .count();
    }
    std::this_thread::sleep_for(milliseconds(20));
  }
  return -1;
}

int64_t UnixMs() {
  return std::chrono::duration_cast<milliseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

void ExpectSameRanksSucceeded(LocalCluster& cluster, const std::string& id,
                              const std::vector<int>& pids) {
  auto job = cluster.WaitEnded(id, seconds(30));
  ASSERT_TRUE(job.ok()) << job.status();
  EXPECT_EQ(job->state(), control::SUCCEEDED) << job->message();
  EXPECT_EQ(job->attempt(), 0);
  EXPECT_EQ(job->restart_count(), 0);
  ASSERT_EQ(job->ranks_size(), 2);
  for (int r = 0; r < 2; ++r) {
    EXPECT_EQ(job->ranks(r).pid(), pids[r]) << "rank " << r << " relaunched";
  }
  for (const auto& e : cluster.Events(id)) {
    EXPECT_NE(e.kind(), "worker_lost") << e.message();
    EXPECT_NE(e.kind(), "attempt_failed") << e.message();
  }
  EXPECT_NE(cluster.Logs(id, -1).find("[rank 1] finished"), std::string::npos);
}

TEST(CoordinatorPauseTest, SigstoppedCoordinatorResumesTheSameRanks) {
  LocalCluster cluster(2);
  std::string id;
  const std::vector<int> pids = StartJob(cluster, &id);
  ASSERT_EQ(pids.size(), 2u);

  ASSERT_EQ(kill(cluster.coordinator_pid(), SIGSTOP), 0);
  std::this_thread::sleep_for(kOutage);
  const int64_t resumed = UnixMs();
  ASSERT_EQ(kill(cluster.coordinator_pid(), SIGCONT), 0);

  const int64_t heard = MsUntilWorkersHeard(cluster, resumed, 2);
  std::cerr << "paused " << kOutage.count() << " ms; both workers heard "
            << heard << " ms after SIGCONT\n";
  EXPECT_GE(heard, 0) << "workers not heard again after the pause";
  auto now = cluster.JobStatus(id);
  ASSERT_TRUE(now.ok()) << now.status();
  EXPECT_EQ(now->state(), control::RUNNING) << now->message();
  for (int r = 0; r < 2; ++r) EXPECT_EQ(kill(pids[r], 0), 0) << "rank " << r;
  ExpectSameRanksSucceeded(cluster, id, pids);
}

TEST(CoordinatorPauseTest, CoordinatorReplacedDuringAPauseReadoptsTheRanks) {
  LocalCluster cluster(2);
  std::string id;
  const std::vector<int> pids = StartJob(cluster, &id);
  ASSERT_EQ(pids.size(), 2u);

  ASSERT_EQ(kill(cluster.coordinator_pid(), SIGSTOP), 0);
  std::this_thread::sleep_for(kOutage / 2);
  cluster.KillCoordinator();  // dies while stopped
  std::this_thread::sleep_for(kOutage / 2);
  const int64_t restarted = UnixMs();
  cluster.StartCoordinator();

  const int64_t heard = MsUntilWorkersHeard(cluster, restarted, 2);
  std::cerr << "outage " << kOutage.count()
            << " ms; both workers re-registered " << heard
            << " ms after the new coordinator started\n";
  EXPECT_GE(heard, 0) << "workers did not re-register";
  for (int r = 0; r < 2; ++r) EXPECT_EQ(kill(pids[r], 0), 0) << "rank " << r;
  ExpectSameRanksSucceeded(cluster, id, pids);
}

TEST(CoordinatorPauseTest, RanksStopOnlyAfterTheGraceAndWorkersStayUp) {
  LocalCluster cluster(2, 500, {"--coordinator-grace-ms", "1500"});
  std::string id;
  const std::vector<int> pids = StartJob(cluster, &id, SleepJob(60, 1));
  ASSERT_EQ(pids.size(), 2u);

  ASSERT_EQ(kill(cluster.coordinator_pid(), SIGSTOP), 0);
  std::this_thread::sleep_for(milliseconds(1000));
  for (int r = 0; r < 2; ++r) {  // within the grace: still running
    EXPECT_EQ(kill(pids[r], 0), 0) << "rank " << r << " stopped early";
  }
  bool gone = false;  // SIGTERM soon after the 1.5 s grace
  for (int i = 0; i < 100 && !gone; ++i) {
    std::this_thread::sleep_for(milliseconds(50));
    gone = kill(pids[0], 0) != 0 && kill(pids[1], 0) != 0;
  }
  EXPECT_TRUE(gone) << "ranks still running after the grace";
  for (int w = 0; w < 2; ++w) {
    EXPECT_EQ(kill(cluster.worker_pid(w), 0), 0) << "worker " << w << " quit";
  }
  std::ifstream log(cluster.dir() + "/worker-0.log");
  std::stringstream text;
  text << log.rdbuf();
  EXPECT_NE(text.str().find("--coordinator-grace-ms): stopping"),
            std::string::npos)
      << text.str();
  ASSERT_EQ(kill(cluster.coordinator_pid(), SIGCONT), 0);

  // The coordinator learns the ranks were stopped and restarts the job on
  // the same, still registered, workers.
  auto restarted = cluster.WaitFor(
      id,
      [](const control::JobInfo& j) {
        return j.attempt() == 1 && j.ranks_size() == 2 &&
               j.ranks(0).state() == control::RANK_RUNNING &&
               j.ranks(1).state() == control::RANK_RUNNING;
      },
      seconds(20));
  ASSERT_TRUE(restarted.ok()) << restarted.status();
  EXPECT_NE(restarted->ranks(0).pid(), pids[0]);
  control::Request cancel;
  cancel.mutable_cancel_job()->set_job_id(id);
  EXPECT_TRUE(cluster.Call(cancel).ok());
}

}  // namespace
}  // namespace strata::testing
