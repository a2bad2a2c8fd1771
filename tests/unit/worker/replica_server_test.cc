// The memory tier in one process (docs/checkpoint.md "Memory tier"): real
// replica servers (worker/replica_server.h) on loopback, each with its own
// directory standing for a node's tmpfs, and mem:// checkpoints written and
// read through them. The multi-host behaviour (a node lost, a spare, the
// durable tier gone) is tests/fault/mem/.
#include "worker/replica_server.h"

#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <memory>
#include <numeric>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "checkpoint/checkpointer.h"
#include "checkpoint/mem_wire.h"
#include "checkpoint/reader.h"
#include "comm/store.h"
#include "common/logging.h"
#include "gtest/gtest.h"

namespace strata::worker {
namespace {

namespace fs = std::filesystem;
using checkpoint::ShardedTensor;

class MemTierTest : public ::testing::Test {
 protected:
  void SetUp() override {
    root_ = ::testing::TempDir() + "/memtier-" + std::to_string(getpid());
    fs::remove_all(root_);
  }
  void TearDown() override {
    servers_.clear();
    fs::remove_all(root_);
  }

  ReplicaServer& AddServer(uint64_t limit = uint64_t{1} << 30) {
    const int i = static_cast<int>(servers_.size());
    servers_.push_back(std::make_unique<ReplicaServer>(
        NodeDir(i), limit, absl::StrCat("n", i), GetLogger("WORKER")));
    Status s = servers_.back()->Start("127.0.0.1", 0, "127.0.0.1");
    EXPECT_TRUE(s.ok()) << s;
    return *servers_.back();
  }
  std::string NodeDir(int i) const { return absl::StrCat(root_, "/node", i); }
  // The rank environment of a rank on `node` of an attempt on `nodes`.
  std::string UseNodes(const std::vector<int>& nodes, int node) {
    std::vector<std::string> eps;
    for (int n : nodes) eps.push_back(servers_[n]->endpoint());
    setenv(checkpoint::mem::kMemPeersEnv, absl::StrJoin(eps, ",").c_str(), 1);
    setenv(checkpoint::mem::kMemNodeEnv, std::to_string(node).c_str(), 1);
    setenv(checkpoint::mem::kMemRateEnv, "0", 1);
    return absl::StrCat("mem://", NodeDir(nodes[node]), "/job-1");
  }

  ShardedTensor Tensor(std::vector<float>& data) {
    ShardedTensor t;
    t.name = "w";
    t.global_shape = t.local_shape = {static_cast<int64_t>(data.size())};
    t.global_offset = {0};
    t.data = data.data();
    return t;
  }
  Status Save(const std::string& uri, int64_t step, std::vector<float>& data,
              int keep_last = 2) {
    checkpoint::CheckpointOptions o;
    o.uri = uri;
    o.store = comm::NewInMemoryStore();
    o.keep_last = keep_last;
    checkpoint::Checkpointer ckpt(o);
    auto h = ckpt.SaveAsync(step, {Tensor(data)}, {{"step", false, "x"}});
    if (!h.ok()) return h.status();
    return ckpt.Wait();
  }

  std::string root_;
  std::vector<std::unique_ptr<ReplicaServer>> servers_;
};

TEST_F(MemTierTest, SavesLocallyAndOnTheBuddyKeepingTheLastSteps) {
  AddServer();
  AddServer();
  const std::string uri = UseNodes({0, 1}, 0);
  std::vector<float> data(300000);
  for (int step = 1; step <= 4; ++step) {
    std::iota(data.begin(), data.end(), static_cast<float>(step));
    ASSERT_TRUE(Save(uri, step, data).ok());
  }
  for (int n : {0, 1}) {
    const std::string job = NodeDir(n) + "/job-1";
    for (int step : {3, 4}) {
      EXPECT_TRUE(fs::exists(checkpoint::StepDir(job, step) + "/manifest.pb"))
          << "node " << n << " step " << step;
      EXPECT_TRUE(fs::exists(checkpoint::StepDir(job, step) + "/rank-00000.data"));
    }
    for (int step : {1, 2}) {
      EXPECT_FALSE(fs::exists(checkpoint::StepDir(job, step)))
          << "node " << n << " still holds dropped step " << step;
    }
  }
  EXPECT_EQ(fs::file_size(checkpoint::StepDir(NodeDir(0) + "/job-1", 4) +
                          "/rank-00000.data"),
            fs::file_size(checkpoint::StepDir(NodeDir(1) + "/job-1", 4) +
                          "/rank-00000.data"));
}

TEST_F(MemTierTest, ASpareLoadsFromThePeerThatHoldsTheReplica) {
  AddServer();
  AddServer();
  AddServer();  // the spare: an empty memory directory
  std::vector<float> data(200000);
  std::iota(data.begin(), data.end(), 7.0f);
  // The job ran on nodes 0 and 1; its rank on node 1 saved (buddy: node 0).
  ASSERT_TRUE(Save(UseNodes({0, 1}, 1), 5, data).ok());
  servers_[1].reset();  // node 1 lost
  fs::remove_all(NodeDir(1));
  // The next attempt runs on node 0 and the spare; the spare's rank reads.
  const std::string uri = UseNodes({0, 2}, 1);
  auto latest = checkpoint::LatestStep(uri);
  ASSERT_TRUE(latest.ok()) << latest.status();
  EXPECT_EQ(*latest, 5);
  std::vector<float> got(data.size(), -1.0f);
  std::vector<ShardedTensor> targets = {Tensor(got)};
  Status loaded = checkpoint::Load(uri, 5, targets);
  ASSERT_TRUE(loaded.ok()) << loaded;
  EXPECT_EQ(got, data);
}

TEST_F(MemTierTest, AReplicaFailingItsChecksumIsDataLoss) {
  AddServer();
  AddServer();
  AddServer();
  std::vector<float> data(100000, 1.5f);
  ASSERT_TRUE(Save(UseNodes({0, 1}, 1), 3, data).ok());
  // Flip a byte of the replica node 0 holds, then read it from the spare.
  const std::string replica =
      checkpoint::StepDir(NodeDir(0) + "/job-1", 3) + "/rank-00000.data";
  {
    std::fstream f(replica, std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(1000);
    f.put('\x7f');
  }
  servers_[1].reset();
  std::vector<float> got(data.size());
  std::vector<ShardedTensor> targets = {Tensor(got)};
  Status loaded = checkpoint::Load(UseNodes({0, 2}, 1), 3, targets);
  EXPECT_TRUE(absl::IsDataLoss(loaded)) << loaded;
}

TEST_F(MemTierTest, AFullWorkerRefusesAndSaysSo) {
  AddServer(64 << 10);  // 64 KiB
  AddServer(64 << 10);
  std::vector<float> data(1 << 18);  // 1 MiB
  Status saved = Save(UseNodes({0, 1}, 0), 1, data);
  ASSERT_TRUE(absl::IsResourceExhausted(saved)) << saved;
  EXPECT_NE(saved.message().find("is full"), std::string::npos) << saved;
  EXPECT_NE(saved.message().find("--mem-limit"), std::string::npos) << saved;
  EXPECT_FALSE(fs::exists(checkpoint::StepDir(NodeDir(0) + "/job-1", 1) +
                          "/manifest.pb"));
  EXPECT_LE(servers_[0]->UsedBytes(), uint64_t{64} << 10);
}

TEST_F(MemTierTest, BadRequestsAreRefusedAndTheServerStaysUp) {
  ReplicaServer& s = AddServer();
  auto fd = checkpoint::mem::Dial(s.endpoint(), 5000);
  ASSERT_TRUE(fd.ok()) << fd.status();
  const std::string junk(64, 'x');
  ASSERT_TRUE(checkpoint::mem::WriteAll(*fd, junk.data(), junk.size(), "t").ok());
  auto reply = checkpoint::mem::RecvReply(*fd, "t");
  ASSERT_TRUE(reply.ok()) << reply.status();
  EXPECT_TRUE(absl::IsInvalidArgument(reply->status)) << reply->status;
  close(*fd);
  checkpoint::mem::ReplicaClient client(s.endpoint(), 5000);
  // A name that climbs out of the directory.
  EXPECT_TRUE(absl::IsInvalidArgument(client.Stat("job-1", 1, "..").status()));
  EXPECT_TRUE(absl::IsInvalidArgument(client.List("../etc").status()));
  auto listed = client.List("job-1");
  ASSERT_TRUE(listed.ok()) << listed.status();
  EXPECT_TRUE(listed->empty());
}

TEST(MemLimitTest, ParsesFractionsAndSizes) {
  EXPECT_EQ(*ParseMemLimit("0.25", 1000), 250u);
  EXPECT_EQ(*ParseMemLimit("64KiB", 0), 65536u);
  EXPECT_EQ(*ParseMemLimit("1.5GiB", 0), uint64_t{3} << 29);
  for (const char* bad : {"0", "1.5", "-1", "abc", "12MB", ""}) {
    auto r = ParseMemLimit(bad, 1000);
    EXPECT_TRUE(absl::IsInvalidArgument(r.status())) << bad;
    EXPECT_NE(r.status().message().find("--mem-limit"), std::string::npos);
  }
}

TEST(TokenBucketTest, PacesPastTheBurst) {
  checkpoint::mem::TokenBucket bucket(20.0 * (1 << 20), 1 << 20);
  const auto t0 = std::chrono::steady_clock::now();
  bucket.Acquire(3 << 20);  // 1 MiB burst, then 2 MiB at 20 MiB/s
  const double s =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - t0)
          .count();
  EXPECT_GE(s, 0.09);
}

}  // namespace
}  // namespace strata::worker
