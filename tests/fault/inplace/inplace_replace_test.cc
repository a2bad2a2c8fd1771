// The worker's side of an in-place restart (RankSupervisor::Replace,
// docs/fault.md "In-place restart"): a hung (stopped) rank is killed and
// started again with the order's generation, an exited one started again,
// and a repeated or older order changes nothing (the coordinator repeats
// its order until the worker reports the new generation).
#include <signal.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <chrono>
#include <filesystem>
#include <thread>

#include "common/clock.h"
#include "worker/rank_supervisor.h"

namespace strata::worker {
namespace {

namespace fs = std::filesystem;

control::RankLaunch Order(int generation) {
  control::RankLaunch order;
  order.set_job_id("job-1");
  order.set_attempt(0);
  order.set_rank(1);
  order.add_command("/bin/sleep");
  order.add_command("30");
  order.set_generation(generation);
  return order;
}

control::RankReport Only(const RankSupervisor& sup) {
  auto reports = sup.Reports();
  EXPECT_EQ(reports.size(), 1u);
  return reports.empty() ? control::RankReport() : reports[0];
}

TEST(InPlaceReplaceTest, ReplacesAHungRankOnceAndAnExitedOne) {
  const fs::path dir = fs::temp_directory_path() /
                       ("strata-inplace-replace-" + std::to_string(getpid()));
  fs::remove_all(dir);
  SystemClock clock;
  {
    RankSupervisor sup(&clock, dir.string(), {});
    sup.Launch(Order(0));
    const control::RankReport first = Only(sup);
    ASSERT_EQ(first.state(), control::RANK_RUNNING) << first.message();
    ASSERT_EQ(kill(first.pid(), SIGSTOP), 0);  // the rank hangs

    const auto t0 = std::chrono::steady_clock::now();
    sup.Replace(Order(1));
    EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::seconds(2));
    const control::RankReport second = Only(sup);
    EXPECT_EQ(second.state(), control::RANK_RUNNING);
    EXPECT_EQ(second.generation(), 1);
    EXPECT_NE(second.pid(), first.pid());
    EXPECT_NE(kill(first.pid(), 0), 0) << "the hung process still exists";

    // The order repeats until reported: the same or an older generation
    // leaves the replacement alone.
    sup.Replace(Order(1));
    sup.Replace(Order(0));
    EXPECT_EQ(Only(sup).pid(), second.pid());

    // A rank that died is started again too.
    ASSERT_EQ(kill(second.pid(), SIGKILL), 0);
    for (int i = 0; i < 200 && sup.running() > 0; ++i) {
      sup.Poll();
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    ASSERT_EQ(Only(sup).state(), control::RANK_EXITED);
    sup.Replace(Order(2));
    const control::RankReport third = Only(sup);
    EXPECT_EQ(third.state(), control::RANK_RUNNING);
    EXPECT_EQ(third.generation(), 2);
    EXPECT_NE(third.pid(), second.pid());

    // A stopped attempt is not started again.
    sup.Stop("job-1/0", 0);
    sup.Replace(Order(3));
    EXPECT_EQ(Only(sup).pid(), third.pid());
  }
  fs::remove_all(dir);
}

// A spare taking a lost node's ranks in place (docs/fault.md "Node loss in
// place") holds nothing of the attempt: the order starts the rank with its
// generation.
TEST(InPlaceReplaceTest, StartsTheRankOnAWorkerThatHoldsNoneOfTheAttempt) {
  const fs::path dir = fs::temp_directory_path() /
                       ("strata-inplace-spare-" + std::to_string(getpid()));
  fs::remove_all(dir);
  SystemClock clock;
  {
    RankSupervisor sup(&clock, dir.string(), {});
    sup.Replace(Order(2));
    const control::RankReport started = Only(sup);
    EXPECT_EQ(started.state(), control::RANK_RUNNING) << started.message();
    EXPECT_EQ(started.generation(), 2);
    sup.Replace(Order(2));  // repeated until reported: nothing changes
    EXPECT_EQ(Only(sup).pid(), started.pid());
    sup.Stop("job-1/0", 0);
  }
  fs::remove_all(dir);
}

}  // namespace
}  // namespace strata::worker
