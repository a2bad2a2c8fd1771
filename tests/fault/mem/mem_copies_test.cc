// The memory tier's copies under faults, in one process (real replica
// servers on loopback, a directory per "node"; milliseconds each):
//  - a local copy failing its checksum is read from the buddy's replica
//    before the caller falls back to the durable tier;
//  - a peer's copy of a step being restored is pinned: retention (a drop
//    from another rank's storage) is refused until the reader lets go.
// Multi-host behaviour is the simhost tests beside this one.
#include <fcntl.h>
#include <sys/socket.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <memory>
#include <numeric>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "checkpoint/checkpointer.h"
#include "checkpoint/mem_wire.h"
#include "checkpoint/reader.h"
#include "checkpoint/storage.h"
#include "comm/store.h"
#include "common/logging.h"
#include "gtest/gtest.h"
#include "worker/replica_server.h"

namespace strata::worker {
namespace {

namespace fs = std::filesystem;
using checkpoint::ShardedTensor;

class MemCopiesTest : public ::testing::Test {
 protected:
  void SetUp() override {
    root_ = ::testing::TempDir() + "/memcopies-" + std::to_string(getpid());
    fs::remove_all(root_);
    for (int i = 0; i < 3; ++i) {
      servers_.push_back(std::make_unique<ReplicaServer>(
          Dir(i), uint64_t{1} << 30, absl::StrCat("n", i), GetLogger("WORKER")));
      ASSERT_TRUE(servers_.back()->Start("127.0.0.1", 0, "127.0.0.1").ok());
    }
  }
  void TearDown() override {
    servers_.clear();
    fs::remove_all(root_);
  }
  std::string Dir(int i) const { return absl::StrCat(root_, "/node", i); }
  // mem:// of a rank on `node` of an attempt on `nodes`.
  std::string On(const std::vector<int>& nodes, int node) {
    std::vector<std::string> eps;
    for (int n : nodes) eps.push_back(servers_[n]->endpoint());
    setenv(checkpoint::mem::kMemPeersEnv, absl::StrJoin(eps, ",").c_str(), 1);
    setenv(checkpoint::mem::kMemNodeEnv, std::to_string(node).c_str(), 1);
    setenv(checkpoint::mem::kMemRateEnv, "0", 1);
    return absl::StrCat("mem://", Dir(nodes[node]), "/job-1");
  }
  static ShardedTensor Tensor(std::vector<float>& data) {
    ShardedTensor t;
    t.name = "w";
    t.global_shape = t.local_shape = {static_cast<int64_t>(data.size())};
    t.global_offset = {0};
    t.data = data.data();
    return t;
  }
  static Status Save(const std::string& uri, int64_t step,
                     std::vector<float>& data) {
    checkpoint::CheckpointOptions o;
    o.uri = uri;
    o.store = comm::NewInMemoryStore();
    o.keep_last = 4;
    checkpoint::Checkpointer ckpt(o);
    auto h = ckpt.SaveAsync(step, {Tensor(data)}, {{"step", false, "x"}});
    if (!h.ok()) return h.status();
    return ckpt.Wait();
  }
  static void Corrupt(const std::string& file, int64_t at) {
    std::fstream f(file, std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(at);
    f.put('\x7f');
  }

  std::string root_;
  std::vector<std::unique_ptr<ReplicaServer>> servers_;
};

TEST_F(MemCopiesTest, ALocalCopyFailingItsChecksumIsReadFromTheBuddy) {
  std::vector<float> data(300000);
  std::iota(data.begin(), data.end(), 0.0f);
  ASSERT_TRUE(Save(On({0, 1}, 0), 7, data).ok());
  const std::string local =
      checkpoint::StepDir(Dir(0) + "/job-1", 7) + "/rank-00000.data";
  ASSERT_TRUE(fs::exists(checkpoint::StepDir(Dir(1) + "/job-1", 7) +
                         "/rank-00000.data"));
  Corrupt(local, 4096 + 100);  // inside the tensor's first block
  std::vector<float> got(data.size(), -1.0f);
  std::vector<ShardedTensor> targets = {Tensor(got)};
  Status loaded = checkpoint::Load(On({0, 1}, 0), 7, targets);
  ASSERT_TRUE(loaded.ok()) << loaded;
  EXPECT_EQ(got, data);
  // Both copies bad: DataLoss naming both, never a wrong state.
  Corrupt(checkpoint::StepDir(Dir(1) + "/job-1", 7) + "/rank-00000.data",
          4096 + 100);
  Status bad = checkpoint::Load(On({0, 1}, 0), 7, targets);
  EXPECT_TRUE(absl::IsDataLoss(bad)) << bad;
  EXPECT_NE(bad.message().find("other copy #0"), std::string::npos) << bad;
}

TEST_F(MemCopiesTest, APeersCopyBeingRestoredIsPinned) {
  std::vector<float> data(1000, 2.5f);
  ASSERT_TRUE(Save(On({0, 1}, 0), 3, data).ok());
  const std::string peer_copy = checkpoint::StepDir(Dir(1) + "/job-1", 3);
  // A spare on node 2 restores from node 1's replica (node 0 is gone).
  servers_[0].reset();
  auto reader = checkpoint::OpenStorage(On({1, 2}, 1));
  ASSERT_TRUE(reader.ok()) << reader.status();
  auto pin = (*reader)->PinStep(3);
  ASSERT_TRUE(pin.ok()) << pin.status();
  // Retention asked by another node's rank: refused while pinned.
  auto other = checkpoint::OpenStorage(On({1, 2}, 1), 0, true);
  ASSERT_TRUE(other.ok());
  Status removed = (*other)->RemoveStep(3);
  EXPECT_TRUE(absl::IsFailedPrecondition(removed)) << removed;
  EXPECT_TRUE(fs::exists(peer_copy + "/manifest.pb"));
  std::vector<float> got(data.size());
  std::vector<ShardedTensor> targets = {Tensor(got)};
  ASSERT_TRUE(checkpoint::Load(**reader, 3, targets).ok());
  EXPECT_EQ(got, data);
  pin->reset();  // released: the drop goes through
  for (int i = 0; i < 50 && fs::exists(peer_copy); ++i) {
    (void)(*other)->RemoveStep(3);
    if (fs::exists(peer_copy)) usleep(20000);
  }
  EXPECT_FALSE(fs::exists(peer_copy));
}

// A replica sent to a buddy that died: sendfile on a socket whose peer is
// gone raises SIGPIPE, which kills the sending rank unless the send blocks
// it (this test process keeps SIGPIPE's default action: it would die).
TEST(MemWireTest, SendingToADeadPeerFailsWithoutSigpipe) {
  const std::string path = testing::TempDir() + "/sendfile-src";
  {
    std::ofstream out(path, std::ios::binary);
    out << std::string(4 << 20, 'x');
  }
  const int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  ASSERT_GE(fd, 0);
  int sv[2];
  ASSERT_EQ(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
  close(sv[1]);  // the peer is gone
  const Status st = checkpoint::mem::SendFileRange(sv[0], fd, 0, 4 << 20, nullptr, "dead buddy");
  EXPECT_FALSE(st.ok());
  EXPECT_NE(st.message().find("dead buddy"), std::string::npos) << st;
  close(sv[0]);
  close(fd);
  std::remove(path.c_str());
}

}  // namespace
}  // namespace strata::worker
