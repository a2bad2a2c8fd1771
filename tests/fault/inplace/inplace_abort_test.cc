// An abort wakes every rank blocked in a collective within a bounded time,
// on each strata backend: what an in-place restart relies on when a peer
// hangs (docs/fault.md "In-place restart"). Three ranks as threads: ranks 0
// and 1 enter an all-reduce, rank 2 never does (it "hangs"); each of 0 and
// 1 is then aborted from another thread, as the runtime's generation
// watcher does, and must return Aborted within kBound.
#include <gtest/gtest.h>

#include <chrono>
#include <future>
#include <thread>
#include <vector>

#include "comm/abortable_store.h"
#include "comm/hybrid/hybrid_transport.h"
#include "comm/process_group.h"
#include "comm/shm/shm_transport.h"
#include "comm/store.h"
#include "comm/tcp/tcp_transport.h"

namespace strata::comm {
namespace {

using Clock = std::chrono::steady_clock;
constexpr auto kBound = std::chrono::milliseconds(1000);
constexpr int kRanks = 3;

StatusOr<std::unique_ptr<Transport>> Connect(const std::string& kind,
                                             std::shared_ptr<Store> store,
                                             int rank) {
  std::chrono::milliseconds timeout(20000);
  if (kind == "tcp") {
    TcpOptions o;
    o.connect_timeout = timeout;
    return ConnectTcpTransport(store, rank, kRanks, o);
  }
  if (kind == "shm") {
    ShmOptions o;
    o.connect_timeout = timeout;
    return ConnectShmTransport(store, rank, kRanks, o);
  }
  TcpOptions t;
  t.connect_timeout = timeout;
  ShmOptions s;
  s.connect_timeout = timeout;
  // Ranks 0 and 1 share a node (shm), rank 2 is on another (tcp).
  return ConnectHybridTransport(store, rank, {0, 0, 1}, t, s);
}

// The ranks' groups, connected side by side.
std::vector<std::unique_ptr<ProcessGroup>> Groups(const std::string& kind) {
  std::vector<std::unique_ptr<Transport>> transports;
  if (kind == "inproc") {
    transports = NewInProcessTransports(kRanks);
  } else {
    auto store = NewInMemoryStore();
    std::vector<std::future<StatusOr<std::unique_ptr<Transport>>>> f;
    for (int r = 0; r < kRanks; ++r) {
      f.push_back(std::async(std::launch::async,
                             [&, r] { return Connect(kind, store, r); }));
    }
    for (auto& x : f) {
      auto t = x.get();
      EXPECT_TRUE(t.ok()) << t.status();
      if (!t.ok()) return {};
      transports.push_back(std::move(*t));
    }
  }
  std::vector<std::unique_ptr<ProcessGroup>> groups;
  GroupOptions o;
  o.timeout = std::chrono::seconds(60);  // far beyond the bound
  for (auto& t : transports) {
    groups.push_back(std::make_unique<ProcessGroup>(std::move(t), o));
  }
  return groups;
}

class AbortTest : public ::testing::TestWithParam<std::string> {};

TEST_P(AbortTest, AbortWakesRanksBlockedOnAHungPeer) {
  auto groups = Groups(GetParam());
  ASSERT_EQ(groups.size(), static_cast<size_t>(kRanks));
  // Large enough for the ring and the hierarchical algorithm.
  std::vector<std::vector<float>> bufs(2, std::vector<float>(1 << 18, 1.0f));
  std::vector<std::shared_ptr<Work>> work;
  for (int r = 0; r < 2; ++r) {
    work.push_back(groups[r]->AllReduce(bufs[r].data(), bufs[r].size(),
                                        DataType::kF32, ReduceOp::kSum));
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  for (int r = 0; r < 2; ++r) {
    EXPECT_FALSE(work[r]->IsCompleted()) << "rank " << r << " did not block";
  }
  // Each surviving rank is aborted by a thread of its own.
  const auto t0 = Clock::now();
  std::vector<std::thread> aborters;
  for (int r = 0; r < 2; ++r) {
    aborters.emplace_back([&, r] { groups[r]->Abort(); });
  }
  for (int r = 0; r < 2; ++r) {
    Status st = work[r]->Wait(kBound);
    const auto took = Clock::now() - t0;
    EXPECT_EQ(st.code(), absl::StatusCode::kAborted)
        << GetParam() << " rank " << r << ": " << st;
    EXPECT_LT(took, kBound) << GetParam() << " rank " << r;
  }
  for (auto& a : aborters) a.join();
  // The group stays broken: the caller re-forms it.
  EXPECT_FALSE(groups[0]->Barrier()->Wait(kBound).ok());
  groups[2]->Abort();
}

INSTANTIATE_TEST_SUITE_P(Backends, AbortTest,
                         ::testing::Values("tcp", "shm", "hybrid", "inproc"),
                         [](const auto& info) { return info.param; });

TEST(AbortableStoreTest, AbortEndsABlockedGetWithinASlice) {
  auto store = std::make_shared<AbortableStore>(NewInMemoryStore());
  auto got = std::async(std::launch::async, [&] {
    return store->Get("never", std::chrono::seconds(30));
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(150));
  const auto t0 = Clock::now();
  store->Abort();
  auto v = got.get();
  EXPECT_EQ(v.status().code(), absl::StatusCode::kAborted) << v.status();
  EXPECT_LT(Clock::now() - t0,
            AbortableStore::kSlice + std::chrono::milliseconds(200));
  EXPECT_EQ(store->Set("k", "v").code(), absl::StatusCode::kAborted);
}

TEST(AbortableStoreTest, PassesThroughUntilAborted) {
  auto store = std::make_shared<AbortableStore>(NewInMemoryStore());
  ASSERT_TRUE(store->Set("k", "v").ok());
  auto v = store->Get("k", std::chrono::seconds(1));
  ASSERT_TRUE(v.ok()) << v.status();
  EXPECT_EQ(*v, "v");
  auto missing = store->Get("absent", std::chrono::milliseconds(250));
  EXPECT_EQ(missing.status().code(), absl::StatusCode::kDeadlineExceeded);
  EXPECT_EQ(*store->Add("n", 2), 2);
}

}  // namespace
}  // namespace strata::comm
