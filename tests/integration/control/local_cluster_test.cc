// control::LocalCluster (control/local_cluster.h) with the real binaries of
// this build ($STRATA_BINARY_DIR): the endpoint read back from a port-0
// listen address, workers registered against it, the announced metrics URL,
// a coordinator that exits or cannot be started reported as such, a restart
// on the same ipc:// address, and no process left after Stop().
#include "control/local_cluster.h"

#include <gtest/gtest.h>
#include <signal.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <thread>
#include <vector>
#include <zmq.hpp>

#include "common/clock.h"
#include "control/dealer_client.h"

namespace strata::control {
namespace {

class LocalClusterTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const char* bin = std::getenv("STRATA_BINARY_DIR");
    ASSERT_NE(bin, nullptr) << "ctest sets STRATA_BINARY_DIR";
    bin_ = bin;
    dir_ = "/tmp/strata-local-cluster-test-" + std::to_string(getpid()) + "-" +
           ::testing::UnitTest::GetInstance()->current_test_info()->name();
    std::filesystem::remove_all(dir_);
  }
  void TearDown() override {
    if (!HasFailure()) std::filesystem::remove_all(dir_);
  }

  LocalClusterOptions Options(int workers) {
    LocalClusterOptions o;
    o.dir = dir_;
    o.coordinator_binary = bin_ + "/coordinator/strata-coordinator";
    o.worker_binary = bin_ + "/worker/strata-worker";
    o.workers = workers;
    o.stop_grace_ms = 2000;
    return o;
  }

  // Workers the coordinator lists as alive, polled for up to 10 s until
  // `want` are.
  int AliveWorkers(const std::string& endpoint, int want) {
    zmq::context_t ctx;
    DealerClient client(&ctx, endpoint);
    int alive = 0;
    for (int i = 0; i < 100 && alive < want; ++i) {
      Request req;
      req.mutable_list_workers();
      auto reply = client.Call(req, 1000);
      alive = 0;
      if (reply.ok()) {
        for (const auto& w : reply->list_workers().workers())
          alive += w.alive();
      }
      if (alive < want)
        std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
    return alive;
  }

  static bool Gone(pid_t pid) { return kill(pid, 0) != 0 && errno == ESRCH; }

  SystemClock clock_;
  std::string bin_, dir_;
};

TEST_F(LocalClusterTest, WorkersRegisterAtTheEndpointReadBack) {
  auto cluster = LocalCluster::Start(Options(2), &clock_);
  ASSERT_TRUE(cluster.ok()) << cluster.status();
  const std::string endpoint = (*cluster)->endpoint();
  EXPECT_TRUE(endpoint.starts_with("tcp://127.0.0.1:")) << endpoint;
  EXPECT_FALSE(endpoint.ends_with(":0")) << endpoint;
  EXPECT_EQ((*cluster)->workers(), 2);
  EXPECT_EQ(AliveWorkers(endpoint, 2), 2);
  EXPECT_TRUE(std::filesystem::is_directory(dir_ + "/coordinator/db"));
  EXPECT_TRUE(std::filesystem::exists(dir_ + "/node-1.log"));

  const std::vector<pid_t> pids = {(*cluster)->coordinator_pid(),
                                   (*cluster)->worker_pid(0),
                                   (*cluster)->worker_pid(1)};
  (*cluster)->Stop();
  for (pid_t p : pids) EXPECT_TRUE(Gone(p)) << "pid " << p;
  EXPECT_EQ((*cluster)->coordinator_pid(), -1);
  (*cluster)->Stop();  // idempotent
}

TEST_F(LocalClusterTest, TheMetricsUrlIsAnnounced) {
  LocalClusterOptions o = Options(0);
  o.coordinator_args = {"--metrics-listen", "127.0.0.1:0"};
  auto cluster = LocalCluster::Start(std::move(o), &clock_);
  ASSERT_TRUE(cluster.ok()) << cluster.status();
  const std::string url = (*cluster)->Announced("metrics");
  EXPECT_TRUE(url.starts_with("http://127.0.0.1:")) << url;
  EXPECT_TRUE(url.ends_with("/metrics")) << url;
  EXPECT_TRUE((*cluster)->Announced("dashboard").ends_with("/"));
  EXPECT_EQ((*cluster)->Announced("no-such-line"), "");
}

TEST_F(LocalClusterTest, ACoordinatorThatExitsIsReportedWithItsLog) {
  LocalClusterOptions o = Options(1);
  o.heartbeat_ms = 1;  // below --heartbeat-ms's range: it exits with 2
  auto cluster = LocalCluster::Start(std::move(o), &clock_);
  ASSERT_FALSE(cluster.ok());
  EXPECT_EQ(cluster.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_NE(cluster.status().message().find(dir_ + "/coordinator.log"),
            std::string::npos)
      << cluster.status();
}

TEST_F(LocalClusterTest, BadBinariesAreRefused) {
  LocalClusterOptions o = Options(1);
  o.worker_binary.clear();
  auto missing = LocalCluster::Start(std::move(o), &clock_);
  EXPECT_EQ(missing.status().code(), absl::StatusCode::kInvalidArgument);

  o = Options(0);
  o.coordinator_binary = dir_ + "/no-such-coordinator";
  auto absent = LocalCluster::Start(std::move(o), &clock_);
  ASSERT_FALSE(absent.ok());
  EXPECT_NE(absent.status().message().find("no-such-coordinator"),
            std::string::npos)
      << absent.status();
}

TEST_F(LocalClusterTest, RestartsOnTheSameIpcAddress) {
  LocalClusterOptions o = Options(0);
  std::filesystem::create_directories(dir_);
  o.listen = "ipc://" + dir_ + "/coordinator.sock";
  auto cluster = LocalCluster::Start(std::move(o), &clock_);
  ASSERT_TRUE(cluster.ok()) << cluster.status();
  const pid_t first = (*cluster)->coordinator_pid();
  (*cluster)->KillCoordinator();
  EXPECT_EQ((*cluster)->coordinator_pid(), -1);
  EXPECT_TRUE(Gone(first));
  ASSERT_TRUE((*cluster)->StartCoordinator().ok());
  EXPECT_GT((*cluster)->coordinator_pid(), 0);
  EXPECT_EQ((*cluster)->endpoint(), "ipc://" + dir_ + "/coordinator.sock");
  zmq::context_t ctx;
  DealerClient client(&ctx, (*cluster)->endpoint());
  Request req;
  req.mutable_list_workers();
  EXPECT_TRUE(client.Call(req, 5000).ok());  // the new one answers
}

}  // namespace
}  // namespace strata::control
