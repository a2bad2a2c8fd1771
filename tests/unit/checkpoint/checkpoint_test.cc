// Save under one (tp, pp, dp) layout, load under others, compare every byte
// with the global tensors; corruption and crash consistency.
#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstring>
#include <fstream>
#include <random>
#include <thread>

#include "checkpoint/checkpointer.h"
#include "checkpoint/reader.h"
#include "gtest/gtest.h"
#include "rocksdb/db.h"

namespace strata::checkpoint {
namespace {

constexpr int kLayers = 4, kRows = 16, kCols = 12;

float Global(const std::string& name, int64_t i) {
  return static_cast<float>(std::hash<std::string>()(name) % 1000) +
         0.001f * static_cast<float>(i);
}

struct Layout {
  int tp, pp, dp;
  int World() const { return tp * pp * dp; }
};

// The shards rank `rank` holds under `l`, with buffers owned by `storage`.
// Per layer: "w_col" [16,12] split by rows over TP (replicated over DP),
// "w_row" [12,16] split by columns over TP, and "w_col.exp_avg" — the
// flattened [192] optimizer state in tp*dp contiguous ZeRO-1 partitions.
std::vector<ShardedTensor> Shards(const Layout& l, int rank,
                                  std::vector<std::vector<float>>& storage,
                                  bool fill) {
  const int tp = rank % l.tp, dp = (rank / l.tp) % l.dp,
            pp = rank / (l.tp * l.dp);
  std::vector<ShardedTensor> out;
  auto add = [&](const std::string& name, std::vector<int64_t> gshape,
                 std::vector<int64_t> off, std::vector<int64_t> shape,
                 int replica, int replicas) {
    ShardedTensor t;
    t.name = name;
    t.global_shape = gshape;
    t.global_offset = off;
    t.local_shape = shape;
    t.replica_id = replica;
    t.num_replicas = replicas;
    storage.emplace_back(t.NumElements(), -1.0f);
    auto& buf = storage.back();
    if (fill) {  // row-major walk of the shard in global coordinates
      for (int64_t i = 0; i < t.NumElements(); ++i) {
        int64_t rem = i, flat = 0, stride = 1;
        std::vector<int64_t> pos(shape.size());
        for (int d = static_cast<int>(shape.size()) - 1; d >= 0; --d) {
          pos[d] = rem % shape[d] + off[d];
          rem /= shape[d];
        }
        for (int d = static_cast<int>(shape.size()) - 1; d >= 0; --d) {
          flat += pos[d] * stride;
          stride *= gshape[d];
        }
        buf[i] = Global(name, flat);
      }
    }
    t.data = buf.data();
    out.push_back(t);
  };
  storage.reserve(64);
  for (int layer = 0; layer < kLayers; ++layer) {
    if (layer * l.pp / kLayers != pp) continue;
    const std::string p = "layer" + std::to_string(layer);
    const int64_t r0 = kRows * tp / l.tp, r1 = kRows * (tp + 1) / l.tp;
    add(p + ".w_col", {kRows, kCols}, {r0, 0}, {r1 - r0, kCols}, dp, l.dp);
    const int64_t c0 = kRows * tp / l.tp, c1 = kRows * (tp + 1) / l.tp;
    add(p + ".w_row", {kCols, kRows}, {0, c0}, {kCols, c1 - c0}, dp, l.dp);
    const int parts = l.tp * l.dp, part = tp * l.dp + dp;
    const int64_t n = kRows * kCols, f0 = n * part / parts,
                  f1 = n * (part + 1) / parts;
    add(p + ".w_col.exp_avg", {n}, {f0}, {f1 - f0}, 0, 1);
  }
  return out;
}

std::string FreshDir(const std::string& name) {
  std::string tmpl = ::testing::TempDir() + "/" + name + "_XXXXXX";
  return mkdtemp(tmpl.data());
}

// With `deferred`, the staging copy runs in the background (DataStates-LLM
// style) and training waits for it before changing its tensors.
void SaveLayout(const std::string& dir, const Layout& l, int64_t step,
                bool deferred = false) {
  auto store = comm::NewInMemoryStore();
  std::vector<std::thread> ranks;
  for (int r = 0; r < l.World(); ++r) {
    ranks.emplace_back([&, r] {
      std::vector<std::vector<float>> storage;
      auto shards = Shards(l, r, storage, true);
      CheckpointOptions o;
      o.uri = dir;
      o.rank = r;
      o.world_size = l.World();
      o.store = store;
      o.block_bytes = 64;  // many blocks per chunk
      o.deferred_snapshot = deferred;
      Checkpointer ckpt(o);
      ASSERT_TRUE(
          ckpt.SaveAsync(step, shards,
                         {Blob{"rng", true, "seed" + std::to_string(r)}})
              .ok());
      ckpt.WaitSnapshot();
      for (auto& s : storage)
        std::fill(s.begin(), s.end(), 0.f);  // training goes on
      Status st = ckpt.Wait();
      ASSERT_TRUE(st.ok()) << st;
    });
  }
  for (auto& t : ranks) t.join();
}

class ReshardTest
    : public ::testing::TestWithParam<
          std::tuple<std::pair<Layout, Layout>, std::string, bool>> {};

// Both backends: a directory and an embedded RocksDB per rank.
TEST_P(ReshardTest, LoadUnderAnotherLayoutMatchesGlobalTensors) {
  const auto [saved, loaded] = std::get<0>(GetParam());
  const std::string dir = std::get<1>(GetParam()) + FreshDir("reshard");
  SaveLayout(dir, saved, 7, std::get<2>(GetParam()));
  ASSERT_EQ(*LatestStep(dir), 7);
  ASSERT_TRUE(Verify(dir, 7).ok());
  for (int r = 0; r < loaded.World(); ++r) {
    std::vector<std::vector<float>> want_storage, got_storage;
    auto want = Shards(loaded, r, want_storage, true);
    auto got = Shards(loaded, r, got_storage, false);
    Status st = Load(dir, 7, got);
    ASSERT_TRUE(st.ok()) << st;
    for (size_t i = 0; i < want.size(); ++i) {
      ASSERT_EQ(0, std::memcmp(want[i].data, got[i].data, want[i].Bytes()))
          << "rank " << r << " tensor " << want[i].name;
    }
  }
  EXPECT_EQ(*LoadBlob(dir, 7, "1/rng"), "seed1");
}

INSTANTIATE_TEST_SUITE_P(
    Layouts, ReshardTest,
    ::testing::Combine(
        ::testing::Values(std::make_pair(Layout{2, 2, 2}, Layout{1, 1, 1}),
                          std::make_pair(Layout{2, 2, 2}, Layout{2, 1, 4}),
                          std::make_pair(Layout{4, 1, 2}, Layout{8, 1, 1}),
                          std::make_pair(Layout{4, 1, 2}, Layout{1, 2, 4}),
                          std::make_pair(Layout{1, 4, 2}, Layout{8, 1, 1}),
                          std::make_pair(Layout{1, 4, 2}, Layout{2, 1, 4})),
        ::testing::Values(std::string("file://"), std::string("rocksdb://")),
        ::testing::Bool()));

TEST(RocksDbTest, DamagedValueIsDataLossAndRetentionDropsOldSteps) {
  const std::string uri = "rocksdb://" + FreshDir("rocks");
  SaveLayout(uri, Layout{2, 1, 1}, 1);
  SaveLayout(uri, Layout{2, 1, 1}, 2);
  EXPECT_EQ(*ListSteps(uri), (std::vector<int64_t>{1, 2}));
  ASSERT_TRUE(Verify(uri, 2).ok());
  {  // overwrite rank 1's first data piece of step 2 with other bytes
    rocksdb::DB* db = nullptr;
    rocksdb::Options o;
    ASSERT_TRUE(
        rocksdb::DB::Open(o, uri.substr(10) + "/rank-00001.rocksdb", &db).ok());
    std::string value;
    const std::string key = "d/000000000002/rank-00001.data/000000000000";
    ASSERT_TRUE(db->Get(rocksdb::ReadOptions(), key, &value).ok());
    value[3] ^= 0x55;
    ASSERT_TRUE(db->Put(rocksdb::WriteOptions(), key, value).ok());
    delete db;
  }
  Status v = Verify(uri, 2);
  EXPECT_EQ(v.code(), absl::StatusCode::kDataLoss) << v;
  EXPECT_NE(v.message().find("rank-00001"), std::string::npos) << v;
  EXPECT_TRUE(Verify(uri, 1).ok());
  EXPECT_EQ(Verify(uri, 9).code(), absl::StatusCode::kNotFound);
}

TEST(InFlightTest, TwoSavesInFlightKeepTheirOwnStagedState) {
  const std::string dir = FreshDir("inflight");
  CheckpointOptions o;
  o.uri = dir;
  o.store = comm::NewInMemoryStore();
  o.max_in_flight = 2;
  Checkpointer ckpt(o);
  std::vector<float> w(1 << 16, 1.f);
  ShardedTensor t;
  t.name = "w";
  t.global_shape = t.local_shape = {1 << 16};
  t.global_offset = {0};
  t.data = w.data();
  ASSERT_TRUE(ckpt.SaveAsync(1, {t}, {}).ok());
  std::fill(w.begin(), w.end(), 2.f);  // training moves on at once
  ASSERT_TRUE(ckpt.SaveAsync(2, {t}, {}).ok());
  std::fill(w.begin(), w.end(), 3.f);
  ASSERT_TRUE(ckpt.Wait().ok());
  for (int64_t step : {1, 2}) {
    std::vector<float> got(1 << 16);
    ShardedTensor g = t;
    g.data = got.data();
    std::vector<ShardedTensor> targets = {g};
    ASSERT_TRUE(Load(dir, step, targets).ok());
    EXPECT_EQ(got[123], static_cast<float>(step));
  }
}

// Deferred snapshots hold the state at SaveAsync: steps 1 and 2 are fenced
// one by one (the tensor changes right after each fence, as an optimizer
// step does); steps 3 and 4 queue before one fence, which must copy (or
// help copy) both. 12 MiB tensors: a dozen copy pieces each.
TEST(InFlightTest, DeferredSnapshotsTakeTheStateAtSaveAsync) {
  const std::string dir = FreshDir("deferred");
  CheckpointOptions o;
  o.uri = dir;
  o.store = comm::NewInMemoryStore();
  o.max_in_flight = 2;
  o.deferred_snapshot = true;
  Checkpointer ckpt(o);
  constexpr int64_t kN = 3 << 20;
  std::vector<float> w(kN, 1.f), w2(kN, 4.f);
  ShardedTensor t;
  t.name = "w";
  t.global_shape = t.local_shape = {kN};
  t.global_offset = {0};
  t.data = w.data();
  EXPECT_EQ(ckpt.Latest().status().code(), absl::StatusCode::kNotFound);
  auto step_blob = [](int64_t step) {
    return std::vector<Blob>{Blob{"step", false, std::to_string(step)}};
  };
  for (int64_t step : {1, 2}) {
    ASSERT_TRUE(ckpt.SaveAsync(step, {t}, step_blob(step)).ok());
    ckpt.WaitSnapshot();
    std::fill(w.begin(), w.end(), static_cast<float>(step + 1));
  }
  StatusOr<SaveHandle> third = ckpt.SaveAsync(3, {t}, step_blob(3));
  ASSERT_TRUE(third.ok());
  t.data = w2.data();
  StatusOr<SaveHandle> fourth = ckpt.SaveAsync(4, {t}, step_blob(4));
  ASSERT_TRUE(fourth.ok());
  ckpt.WaitSnapshot();
  std::fill(w.begin(), w.end(), 9.f);
  std::fill(w2.begin(), w2.end(), 9.f);
  EXPECT_TRUE(third->Wait().ok());  // one save's own result
  EXPECT_EQ(third->step(), 3);
  ASSERT_TRUE(ckpt.Wait().ok());
  EXPECT_TRUE(fourth->done());
  EXPECT_EQ(*ckpt.Latest(), 4);
  for (int64_t step : {1, 2, 3, 4}) {
    std::vector<float> got(kN);
    ShardedTensor g = t;
    g.data = got.data();
    std::vector<ShardedTensor> targets = {g};
    ASSERT_TRUE(Load(dir, step, targets).ok());
    EXPECT_EQ(std::count(got.begin(), got.end(), static_cast<float>(step)), kN)
        << "step " << step;
    EXPECT_EQ(*LoadBlob(dir, step, "step"), std::to_string(step));
  }
}

TEST(CorruptionTest, FlippedByteTruncationAndMissingManifestAreReported) {
  const std::string dir = FreshDir("corrupt");
  SaveLayout(dir, Layout{2, 1, 1}, 3);
  const std::string data = StepDir(dir, 3) + "/rank-00000.data";
  {
    std::fstream f(data, std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(100);
    char c;
    f.read(&c, 1);
    f.seekp(100);
    c ^= 0x40;
    f.write(&c, 1);
  }
  Status v = Verify(dir, 3);
  EXPECT_EQ(v.code(), absl::StatusCode::kDataLoss) << v;
  EXPECT_NE(v.message().find("rank-00000.data"), std::string::npos) << v;
  EXPECT_NE(v.message().find("checksum mismatch"), std::string::npos) << v;
  std::vector<std::vector<float>> storage;
  auto targets = Shards(Layout{1, 1, 1}, 0, storage, false);
  Status l = Load(dir, 3, targets);
  EXPECT_EQ(l.code(), absl::StatusCode::kDataLoss) << l;
  EXPECT_NE(l.message().find("tensor '"), std::string::npos) << l;

  ASSERT_EQ(truncate((StepDir(dir, 3) + "/rank-00001.data").c_str(), 10), 0);
  Status t = Verify(dir, 3);
  EXPECT_EQ(t.code(), absl::StatusCode::kDataLoss) << t;

  ASSERT_EQ(unlink((StepDir(dir, 3) + "/manifest.pb").c_str()), 0);
  EXPECT_EQ(Verify(dir, 3).code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(LatestStep(dir).status().code(), absl::StatusCode::kNotFound);
}

TEST(CrashTest, SigkillDuringSavesNeverLeavesAPartialCommittedCheckpoint) {
  const std::string dir = FreshDir("crash");
  std::mt19937 rng(42);
  int64_t next_step = 0;
  for (int trial = 0; trial < 50; ++trial) {
    pid_t pid = fork();
    if (pid == 0) {
      // Child: save bigger states in a loop until killed.
      std::vector<float> w(1 << 16);
      CheckpointOptions o;
      o.uri = dir;
      o.store = comm::NewInMemoryStore();
      Checkpointer ckpt(o);
      for (int64_t step = next_step;; ++step) {
        for (size_t i = 0; i < w.size(); ++i)
          w[i] = static_cast<float>(step + i);
        ShardedTensor t;
        t.name = "w";
        t.global_shape = t.local_shape = {static_cast<int64_t>(w.size())};
        t.global_offset = {0};
        t.data = w.data();
        if (!ckpt.SaveAsync(step, {t}, {}).ok() || !ckpt.Wait().ok()) _exit(1);
      }
    }
    // Mostly mid-save kills; every tenth trial gives the child time to
    // commit, so the check below has something to load even on a slow box.
    std::this_thread::sleep_for(trial % 10 == 9
                                    ? std::chrono::microseconds(300000)
                                    : std::chrono::microseconds(rng() % 20000));
    kill(pid, SIGKILL);
    waitpid(pid, nullptr, 0);
    auto latest = LatestStep(dir);
    if (!latest.ok()) continue;  // killed before the first commit
    next_step = *latest + 1;
    ASSERT_TRUE(Verify(dir, *latest).ok()) << "trial " << trial;
    std::vector<float> w(1 << 16);
    ShardedTensor t;
    t.name = "w";
    t.global_shape = t.local_shape = {static_cast<int64_t>(w.size())};
    t.global_offset = {0};
    t.data = w.data();
    std::vector<ShardedTensor> targets = {t};
    ASSERT_TRUE(Load(dir, *latest, targets).ok()) << "trial " << trial;
    EXPECT_EQ(w[5], static_cast<float>(*latest + 5));
  }
  EXPECT_GT(next_step, 0) << "no checkpoint was ever committed";
}

}  // namespace
}  // namespace strata::checkpoint
