// The backend factory: names, errors, and real collectives through each
// CPU backend that runs as threads of one process (shm, tcp, hybrid; mpi is
// covered under mpirun by tests/integration/comm/mpi).
#include "comm/backend_factory.h"

#include <algorithm>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"

namespace strata::comm {
namespace {

// Runs fn(rank, backend) on one thread per rank of the node map, each with
// a backend from the factory.
void RunFactoryRanks(const std::string& name, const std::vector<int>& node_of,
                     const std::function<void(int, Backend&)>& fn) {
  auto store = NewInMemoryStore();
  const int n = static_cast<int>(node_of.size());
  std::vector<std::thread> threads;
  for (int r = 0; r < n; ++r) {
    threads.emplace_back([&, r] {
      BackendOptions o;
      o.name = name;
      o.rank = r;
      o.node_of = node_of;
      o.store = store;
      o.group.timeout = std::chrono::seconds(30);
      auto b = NewBackend(o);
      ASSERT_TRUE(b.ok()) << name << " rank " << r << ": " << b.status();
      EXPECT_EQ((*b)->rank(), r);
      EXPECT_EQ((*b)->size(), n);
      fn(r, **b);
    });
  }
  for (auto& t : threads) t.join();
}

TEST(BackendFactoryTest, ListsTheCpuBackendsFirst) {
  const std::vector<std::string> names = AvailableBackends();
  ASSERT_GE(names.size(), 3u);
  EXPECT_EQ(names[0], "shm");
  EXPECT_EQ(names[1], "tcp");
  EXPECT_EQ(names[2], "hybrid");
  for (size_t i = 3; i < names.size(); ++i)
    EXPECT_TRUE(names[i] == "mpi" || names[i] == "nccl") << names[i];
}

TEST(BackendFactoryTest, UnknownNameIsInvalidArgumentNamingItAndTheChoices) {
  BackendOptions o;
  o.name = "gloo";
  auto b = NewBackend(o);
  ASSERT_EQ(b.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(b.status().message().find("'gloo' is unknown"), std::string::npos)
      << b.status();
  EXPECT_NE(b.status().message().find("available: shm, tcp, hybrid"),
            std::string::npos)
      << b.status();
}

TEST(BackendFactoryTest, BackendsNotBuiltAreInvalidArgument) {
  const std::vector<std::string> names = AvailableBackends();
  for (const std::string name : {"mpi", "nccl"}) {
    if (std::find(names.begin(), names.end(), name) != names.end()) continue;
    BackendOptions o;
    o.name = name;
    auto b = NewBackend(o);
    EXPECT_EQ(b.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_NE(b.status().message().find("is not built in"), std::string::npos)
        << b.status();
  }
}

TEST(BackendFactoryTest, OptionsThatDoNotFitAreInvalidArgument) {
  BackendOptions o;
  o.name = "tcp";
  o.node_of = {0, 1};
  o.rank = 2;  // outside the node map
  o.store = NewInMemoryStore();
  auto bad_rank = NewBackend(o);
  EXPECT_EQ(bad_rank.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(bad_rank.status().message().find("rank 2"), std::string::npos);
  o.rank = 0;
  o.store = nullptr;
  EXPECT_EQ(NewBackend(o).status().code(), absl::StatusCode::kInvalidArgument);
  o.name = "shm";  // two nodes cannot share memory
  o.store = NewInMemoryStore();
  auto shm = NewBackend(o);
  EXPECT_EQ(shm.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(shm.status().message().find("2 nodes"), std::string::npos);
}

// All-reduce and a crossing SendRecv larger than the shm ring (4 MiB for 2-4
// ranks, DefaultShmRingBytes) and socket buffers: as two separate blocking
// sends it would deadlock.
void AllReduceAndExchange(int r, Backend& b) {
  const int n = b.size();
  std::vector<float> v(1000, static_cast<float>(r + 1));
  ASSERT_TRUE(b.AllReduce(v.data(), v.size(), DataType::kF32, ReduceOp::kSum)
                  ->Wait()
                  .ok());
  EXPECT_EQ(v[999], n * (n + 1) / 2.0f);
  const size_t big = 3 << 20;  // 12 MiB of floats
  std::vector<float> out(big, static_cast<float>(r)), in(big, -1.0f);
  const int right = (r + 1) % n, left = (r + n - 1) % n;
  Status st =
      b.SendRecv(out.data(), big, right, in.data(), big, left, DataType::kF32)
          ->Wait();
  ASSERT_TRUE(st.ok()) << st;
  EXPECT_EQ(in[0], static_cast<float>(left));
  EXPECT_EQ(in[big - 1], static_cast<float>(left));
}

TEST(BackendFactoryTest, ShmTwoRanks) {
  RunFactoryRanks("shm", {0, 0}, [](int r, Backend& b) {
    EXPECT_STREQ(b.name(), "shm");
    AllReduceAndExchange(r, b);
  });
}

TEST(BackendFactoryTest, TcpTwoRanks) {
  RunFactoryRanks("tcp", {0, 0}, [](int r, Backend& b) {
    EXPECT_STREQ(b.name(), "tcp");
    AllReduceAndExchange(r, b);
  });
}

TEST(BackendFactoryTest, HybridPicksTransportsFromTheNodeMap) {
  RunFactoryRanks("hybrid", {0, 0}, [](int r, Backend& b) {
    EXPECT_STREQ(b.name(), "shm");  // one node: shared memory only
    AllReduceAndExchange(r, b);
  });
  RunFactoryRanks("hybrid", {0, 0, 1, 1}, [](int r, Backend& b) {
    EXPECT_STREQ(b.name(), "shm+tcp");
    AllReduceAndExchange(r, b);
  });
}

TEST(BackendFactoryTest, OneRankNeedsNoStore) {
  BackendOptions o;  // hybrid, one rank
  auto b = NewBackend(o);
  ASSERT_TRUE(b.ok()) << b.status();
  std::vector<int32_t> v = {7};
  ASSERT_TRUE((*b)->AllReduce(v.data(), 1, DataType::kI32, ReduceOp::kSum)
                  ->Wait()
                  .ok());
  EXPECT_EQ(v[0], 7);
}

// tp=2 x dp=2 on two nodes (tp inside a node), every group listed.
Placement TwoByTwo() {
  Placement pl;
  for (int r = 0; r < 4; ++r) {
    RankPlacement* p = pl.add_ranks();
    p->set_rank(r);
    p->set_node(r / 2);
    p->set_tp_rank(r % 2);
    p->set_dp_rank(r / 2);
  }
  auto add = [&](const char* kind, int index, std::vector<int> ranks) {
    Group* g = pl.add_groups();
    g->set_kind(kind);
    g->set_index(index);
    for (int m : ranks) g->add_ranks(m);
  };
  add("tp", 0, {0, 1});
  add("tp", 1, {2, 3});
  add("dp", 0, {0, 2});
  add("dp", 1, {1, 3});
  for (int r = 0; r < 4; ++r) {
    add("cp", r, {r});
    add("pp", r, {r});
  }
  return pl;
}

TEST(BackendFactoryTest, PlanGroupsOverHybridReduceTheirMembers) {
  const Placement pl = TwoByTwo();
  auto store = NewInMemoryStore();
  std::vector<std::thread> threads;
  for (int r = 0; r < 4; ++r) {
    threads.emplace_back([&, r] {
      BackendOptions o;
      o.rank = r;
      o.node_of = {0, 0, 1, 1};
      o.store = store;
      auto groups = NewPlanGroups(o, pl);
      ASSERT_TRUE(groups.ok()) << groups.status();
      EXPECT_EQ((*groups)->tp_index, r / 2);
      EXPECT_EQ((*groups)->dp_index, r % 2);
      EXPECT_EQ((*groups)->pp->size(), 1);
      int64_t tp[1] = {r}, dp[1] = {r};
      ASSERT_TRUE((*groups)
                      ->tp->AllReduce(tp, 1, DataType::kI64, ReduceOp::kSum)
                      ->Wait()
                      .ok());
      ASSERT_TRUE((*groups)
                      ->dp->AllReduce(dp, 1, DataType::kI64, ReduceOp::kSum)
                      ->Wait()
                      .ok());
      EXPECT_EQ(tp[0], r / 2 == 0 ? 0 + 1 : 2 + 3);
      EXPECT_EQ(dp[0], r % 2 == 0 ? 0 + 2 : 1 + 3);
    });
  }
  for (auto& t : threads) t.join();
}

}  // namespace
}  // namespace strata::comm
