// ForkJoin: every index of [0, n) runs exactly once per Run, on chunks
// split as the header says, whether the workers were spinning or asleep,
// for n below, at and above the team's size; a worker that falls behind
// leaves its chunks to the caller; and a team destroyed while its workers
// sleep joins them.
#include "common/fork_join.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <mutex>
#include <set>
#include <thread>
#include <utility>
#include <vector>

namespace strata {
namespace {

// Runs `n` through `team`, checking each index ran once, in non-empty
// chunks, at most 4 per thread, of sizes differing by <= 1.
void RunAndCheck(ForkJoin& team, int n) {
  std::vector<std::atomic<int>> hits(n);
  std::mutex mu;
  std::vector<std::pair<int, int>> ranges;
  std::set<std::thread::id> threads;
  team.Run(n, [&](int begin, int end) {
    for (int i = begin; i < end; ++i) hits[i].fetch_add(1);
    std::lock_guard<std::mutex> lock(mu);
    ranges.emplace_back(begin, end);
    threads.insert(std::this_thread::get_id());
  });
  for (int i = 0; i < n; ++i) ASSERT_EQ(hits[i].load(), 1) << "index " << i;
  ASSERT_LE(static_cast<int>(ranges.size()), 4 * team.threads());
  ASSERT_LE(static_cast<int>(threads.size()), team.threads());
  size_t lo = n, hi = 0;
  for (auto [b, e] : ranges) {
    ASSERT_LT(b, e);  // empty ranges are not run
    lo = std::min<size_t>(lo, e - b);
    hi = std::max<size_t>(hi, e - b);
  }
  if (n > 0) EXPECT_LE(hi - lo, 1u) << "n " << n;
}

TEST(ForkJoinTest, EveryIndexOnceForAnyN) {
  for (int threads : {1, 2, 3, 5}) {
    ForkJoin team(threads);
    EXPECT_EQ(team.threads(), threads);
    for (int n : {0, 1, 2, 3, 4, 5, 7, 40, 1000}) RunAndCheck(team, n);
  }
}

TEST(ForkJoinTest, ManyRunsBackToBack) {
  ForkJoin team(3);
  for (int i = 0; i < 20000; ++i) RunAndCheck(team, 1 + i % 9);
}

// A worker that is slow (here: each of its chunks takes 20 ms; on a busy
// machine, one waiting for a core) holds up only the chunk it claimed:
// the caller claims the rest. With a static split the caller would run
// half of them.
TEST(ForkJoinTest, ASlowWorkerLeavesItsChunksToTheCaller) {
  ForkJoin team(2);
  const std::thread::id caller = std::this_thread::get_id();
  std::atomic<int> by_caller{0}, by_worker{0};
  team.Run(8, [&](int begin, int end) {
    if (std::this_thread::get_id() == caller) {
      by_caller += end - begin;
    } else {
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
      by_worker += end - begin;
    }
  });
  EXPECT_EQ(by_caller + by_worker, 8);
  EXPECT_GE(by_caller.load(), 6);
}

TEST(ForkJoinTest, RunsAfterWorkersSlept) {
  ForkJoin team(2);
  for (int i = 0; i < 5; ++i) {
    // Longer than the spin budget: the workers are on the futex.
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
    RunAndCheck(team, 10);
  }
}

TEST(ForkJoinTest, DestroyedWhileWorkersSleep) {
  const auto t0 = std::chrono::steady_clock::now();
  {
    ForkJoin team(4);
    RunAndCheck(team, 8);
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::seconds(5));
}

}  // namespace
}  // namespace strata
