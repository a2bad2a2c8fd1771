// ForkJoin: every index of [0, n) runs exactly once per Run, on ranges
// split as the header says, whether the workers were spinning or asleep,
// for n below, at and above the team's size; and a team destroyed while
// its workers sleep joins them.
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

// Runs `n` through `team`, checking each index ran once, ranges were
// contiguous and at most threads() of them, sizes differing by <= 1.
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
  ASSERT_LE(static_cast<int>(ranges.size()), team.threads());
  ASSERT_EQ(ranges.size(), threads.size());  // one range per thread
  size_t lo = n, hi = 0;
  for (auto [b, e] : ranges) {
    ASSERT_LT(b, e);  // empty ranges are not run
    lo = std::min<size_t>(lo, e - b);
    hi = std::max<size_t>(hi, e - b);
  }
  if (n > 0) EXPECT_LE(hi - lo, 1u) << "n " << n;
  if (n >= team.threads()) {
    EXPECT_EQ(static_cast<int>(ranges.size()), team.threads());
  }
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
