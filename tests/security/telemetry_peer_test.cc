// Finding 2 of issue 30 at the worker: ranks of two jobs on one worker, the
// rank of job B pushes step reports for job A's rank through the shared
// telemetry socket. The worker checks each connection's peer credentials
// (SO_PEERCRED): the forged report is refused and logged naming the pid and
// the claimed identity, the honest ones (also from a rank's child process)
// go on, a process the worker never started is refused, and the arrival
// evidence a rank puts in its report is never forwarded as the worker's.
#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
#include <set>
#include <thread>
#include <tuple>

#include "absl/strings/str_cat.h"
#include "common/clock.h"
#include "placement/rank_env.h"
#include "worker/private_dir.h"
#include "worker/rank_supervisor.h"
#include "worker/telemetry.h"

namespace strata::worker {
namespace {

using Key = std::tuple<std::string, int, int64_t>;  // job, rank, step

control::RankLaunch Order(const std::string& job, int rank,
                          std::vector<std::string> command) {
  control::RankLaunch o;
  o.set_job_id(job);
  o.set_attempt(0);
  o.set_rank(rank);
  for (auto& c : command) o.add_command(std::move(c));
  return o;
}

TEST(TelemetryPeerTest, ARankCannotReportForAnotherJobsRank) {
  const std::string dir =
      absl::StrCat(::testing::TempDir(), "/telemetry_peer_", getpid());
  ASSERT_TRUE(MakePrivateDir(dir).ok());
  const std::string ep = absl::StrCat("ipc://", dir, "/telemetry.sock");
  zmq::context_t ctx;
  TelemetrySink sink(&ctx);
  ASSERT_TRUE(sink.Bind(ep).ok());
  SystemClock clock;
  RankSupervisor ranks(&clock, dir, {{placement::kTelemetry, ep}});
  sink.SetRanks(&ranks);

  std::set<Key> got;
  auto take = [&](auto done) {
    for (int i = 0; i < 250 && !done(); ++i) {
      for (const control::StepReport& s : sink.TakeChanged()) {
        got.insert({s.job_id(), s.rank(), s.step()});
        // The rank's claimed arrival evidence is not the worker's reading
        // (it has no flight recorder at all).
        EXPECT_EQ(s.recorded_ops(), 0);
        EXPECT_EQ(s.recorded_share(), 0);
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
  };
  // A process the worker never started.
  zmq::socket_t outsider(ctx, zmq::socket_type::push);
  outsider.connect(ep);
  control::StepReport forged;
  forged.set_job_id("job-a");
  forged.set_rank(0);
  forged.set_step(9);
  outsider.send(zmq::buffer(forged.SerializeAsString()));
  take([&] { return sink.refused() >= 1; });
  ASSERT_EQ(sink.refused(), 1u);
  EXPECT_NE(sink.last_refusal().find(absl::StrCat(
                "from pid ", getpid(), " (uid ", geteuid(),
                ") claiming job 'job-a' rank 0: the pid is not a rank this "
                "worker started")),
            std::string::npos)
      << sink.last_refusal();

  const std::string push = STRATA_TELEMETRY_PUSH;
  // Job A's rank 0 reports its step 1.
  ranks.Launch(Order("job-a", 0, {push, "job-a", "0", "1"}));
  // Job B's rank 0 (a shell, so the pushes come from its children) reports
  // its own step 2 and forges step 7 of job A's rank 0.
  ranks.Launch(Order(
      "job-b", 0,
      {"/bin/sh", "-c",
       absl::StrCat(push, " job-b 0 2 & ", push, " job-a 0 7 & wait")}));
  take([&] { return got.size() >= 2 && sink.refused() >= 2; });
  EXPECT_EQ(got, (std::set<Key>{{"job-a", 0, 1}, {"job-b", 0, 2}}));
  ASSERT_EQ(sink.refused(), 2u);
  const std::string last = sink.last_refusal();
  EXPECT_NE(last.find("from pid "), std::string::npos) << last;
  EXPECT_NE(last.find("claiming job 'job-a' rank 0: it is rank 0 of job "
                      "'job-b' attempt 0"),
            std::string::npos)
      << last;
  ranks.StopAll(2000);
}

}  // namespace
}  // namespace strata::worker
