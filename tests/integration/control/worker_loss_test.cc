// Multi-process: real strata-coordinator and two strata-worker processes on
#include <fcntl.h>
// an ipc endpoint. SIGKILL one worker and assert the coordinator declares it
// lost within 3 heartbeat intervals (plus the 50 ms liveness tick).
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <thread>
#include <vector>

#include "control/dealer_client.h"
#include "tests/integration/control/process_util.h"

namespace strata::coordinator {
namespace {

// Long enough that a loaded 2-core CI machine's scheduling delays stay small
// next to it.
constexpr int kHeartbeatMs = 500;

using strata::testing::Spawn;
void Kill(pid_t pid) { strata::testing::KillAndReap(pid); }

StatusOr<control::ListWorkersReply> List(control::DealerClient& client) {
  control::Request req;
  req.mutable_list_workers();
  ASSIGN_OR_RETURN(control::Reply reply, client.Call(req, 1000));
  return reply.list_workers();
}

TEST(WorkerLossTest, SigkilledWorkerDeclaredLostWithinThreeIntervals) {
  const char* bin = std::getenv("STRATA_BINARY_DIR");
  ASSERT_NE(bin, nullptr);
  std::string dir = std::string(bin);
  std::string state = "/tmp/strata-loss-" + std::to_string(getpid());
  std::string endpoint = "ipc://" + state + ".sock";
  pid_t coord =
      Spawn({dir + "/coordinator/strata-coordinator", "--state-dir", state,
             "--listen", endpoint, "--heartbeat-ms",
             std::to_string(kHeartbeatMs), "--missed-heartbeats", "3"});
  pid_t w0 = Spawn({dir + "/worker/strata-worker", "--coordinator", endpoint,
                    "--node-name", "n0"});
  pid_t w1 = Spawn({dir + "/worker/strata-worker", "--coordinator", endpoint,
                    "--node-name", "n1"});
  strata::testing::ProcessReaper reaper;
  reaper.Watch(&coord);
  reaper.Watch(&w0);
  reaper.Watch(&w1);
  zmq::context_t ctx;
  control::DealerClient client(&ctx, endpoint);

  int alive = 0;
  for (int i = 0; i < 100 && alive < 2; ++i) {  // up to ~10 s
    auto list = List(client);
    alive = 0;
    if (list.ok()) {
      for (const auto& w : list->workers()) alive += w.alive() ? 1 : 0;
    }
    if (alive < 2) std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  ASSERT_EQ(alive, 2) << "workers did not register";

  auto killed_at = std::chrono::steady_clock::now();
  Kill(w1);
  w1 = -1;
  bool lost = false;
  int64_t elapsed_ms = 0;
  while (!lost && elapsed_ms < 10 * kHeartbeatMs) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
    auto list = List(client);
    ASSERT_TRUE(list.ok()) << list.status();
    for (const auto& w : list->workers()) {
      if (w.node_name() == "n1" && !w.alive()) lost = true;
      if (w.node_name() == "n0") {
        EXPECT_TRUE(w.alive());
      }
    }
    elapsed_ms = std::chrono::duration_cast<std::chrono::milliseconds>(
                     std::chrono::steady_clock::now() - killed_at)
                     .count();
  }
  Kill(w0);
  w0 = -1;
  Kill(coord);
  coord = -1;
  std::filesystem::remove_all(state);
  std::filesystem::remove(state + ".sock");
  ASSERT_TRUE(lost);
  std::printf("worker declared lost %lld ms after SIGKILL (interval %d ms)\n",
              static_cast<long long>(elapsed_ms), kHeartbeatMs);
  // Three missed intervals, plus the coordinator's check period and this
  // test's polling and scheduling on a loaded machine.
  EXPECT_LE(elapsed_ms, 3 * kHeartbeatMs + 300);
}

}  // namespace
}  // namespace strata::coordinator
