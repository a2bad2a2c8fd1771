// fault/inject on real child processes (fork + exec of /bin/sh loops).
#include "fault/inject/inject.h"

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <fstream>
#include <string>
#include <thread>

#include "gtest/gtest.h"

namespace strata::fault {
namespace {

// A child that spins in /bin/sh with the given rank environment.
pid_t SpawnRank(const std::string& job, int rank) {
  const pid_t pid = fork();
  if (pid == 0) {
    const std::string job_var = "STRATA_JOB_ID=" + job;
    const std::string rank_var = "RANK=" + std::to_string(rank);
    char* const env[] = {const_cast<char*>(job_var.c_str()),
                         const_cast<char*>(rank_var.c_str()), nullptr};
    char* const argv[] = {const_cast<char*>("sh"), const_cast<char*>("-c"),
                          const_cast<char*>("while :; do :; done"), nullptr};
    execve("/bin/sh", argv, env);
    _exit(127);
  }
  return pid;
}

// The state letter of /proc/PID/stat ('T' when stopped), '?' if gone.
char State(pid_t pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/stat");
  std::string stat((std::istreambuf_iterator<char>(in)), {});
  const size_t paren = stat.rfind(')');
  return paren == std::string::npos || paren + 2 >= stat.size()
             ? '?'
             : stat[paren + 2];
}

// Signals arrive asynchronously: polls up to 1 s for the state to become
// (`want` true) or stop being (`want` false) 'T'.
bool Stopped(pid_t pid, bool want) {
  for (int i = 0; i < 100; ++i) {
    if ((State(pid) == 'T') == want) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return false;
}

void Reap(pid_t pid) {
  kill(pid, SIGKILL);
  waitpid(pid, nullptr, 0);
}

// Waits up to 2 s for /proc to show the exec'd environment.
StatusOr<std::vector<pid_t>> FindSoon(const std::string& job, int rank) {
  StatusOr<std::vector<pid_t>> r = absl::NotFoundError("not yet");
  for (int i = 0; i < 200 && !r.ok(); ++i) {
    r = FindRank(job, rank);
    if (!r.ok()) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return r;
}

TEST(InjectTest, FindsTheRankByItsEnvironmentOnly) {
  const std::string job = "inject-find-" + std::to_string(getpid());
  const pid_t r0 = SpawnRank(job, 0), r1 = SpawnRank(job, 1);
  auto found = FindSoon(job, 1);
  ASSERT_TRUE(found.ok()) << found.status();
  EXPECT_EQ(*found, std::vector<pid_t>{r1});
  auto missing = FindRank(job, 2);
  EXPECT_TRUE(absl::IsNotFound(missing.status()));
  EXPECT_NE(std::string(missing.status().message()).find("RANK=2"),
            std::string::npos);
  EXPECT_TRUE(absl::IsNotFound(FindRank(job + "x", 0).status()));
  Reap(r0);
  Reap(r1);
}

TEST(InjectTest, SlowStopsForTheRightShareAndLeavesTheProcessRunning) {
  const std::string job = "inject-slow-" + std::to_string(getpid());
  const pid_t pid = SpawnRank(job, 0);
  ASSERT_TRUE(FindSoon(job, 0).ok());
  std::atomic<bool> stop{false};
  bool seen_stopped = false;
  std::thread watch([&] {
    for (int i = 0; i < 200 && !stop; ++i) {
      seen_stopped |= State(pid) == 'T';
      std::this_thread::sleep_for(std::chrono::milliseconds(3));
    }
  });
  SlowOptions o;
  o.factor = 2;
  o.period_ms = 40;
  o.duration_ms = 600;
  auto stopped = Slow({pid}, o, stop);
  stop = true;
  watch.join();
  ASSERT_TRUE(stopped.ok()) << stopped.status();
  EXPECT_TRUE(seen_stopped);
  // Half of each 40 ms period stopped, over 600 ms: about 300 ms (the
  // sleeps only overshoot).
  EXPECT_GE(*stopped, 250);
  EXPECT_LE(*stopped, 600);
  EXPECT_TRUE(Stopped(pid, false));
  Reap(pid);
}

TEST(InjectTest, AnInterruptedSlowContinuesTheProcess) {
  const std::string job = "inject-int-" + std::to_string(getpid());
  const pid_t pid = SpawnRank(job, 0);
  ASSERT_TRUE(FindSoon(job, 0).ok());
  std::atomic<bool> stop{false};
  SlowOptions o;
  o.factor = 50;  // stopped nearly all the time
  o.period_ms = 1000;
  std::thread stopper([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    stop = true;
  });
  auto stopped = Slow({pid}, o, stop);
  stopper.join();
  ASSERT_TRUE(stopped.ok()) << stopped.status();
  EXPECT_TRUE(Stopped(pid, false));
  Reap(pid);
}

TEST(InjectTest, HangStopsAndADurationContinues) {
  const std::string job = "inject-hang-" + std::to_string(getpid());
  const pid_t pid = SpawnRank(job, 0);
  ASSERT_TRUE(FindSoon(job, 0).ok());
  std::atomic<bool> stop{false};
  ASSERT_TRUE(Hang({pid}, -1, stop).ok());
  EXPECT_TRUE(Stopped(pid, true));
  kill(pid, SIGCONT);
  EXPECT_TRUE(Stopped(pid, false));
  std::thread check([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    EXPECT_EQ(State(pid), 'T');
  });
  ASSERT_TRUE(Hang({pid}, 300, stop).ok());
  check.join();
  EXPECT_TRUE(Stopped(pid, false));
  Reap(pid);
}

TEST(InjectTest, BadOptionsAreRefused) {
  std::atomic<bool> stop{false};
  SlowOptions o;
  o.factor = 1;
  EXPECT_TRUE(absl::IsInvalidArgument(Slow({1}, o, stop).status()));
  o.factor = 2;
  o.period_ms = 0;
  EXPECT_TRUE(absl::IsInvalidArgument(Slow({1}, o, stop).status()));
}

}  // namespace
}  // namespace strata::fault
