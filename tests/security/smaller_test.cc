// Finding 5 of issue 30: the metrics listener's loopback decision, what
// strata-inject acts on, and node names.
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <chrono>
#include <filesystem>
#include <thread>

#include "control/curve_keys.h"
#include "fault/inject/inject.h"
#include "observe/http_server.h"

namespace strata {
namespace {

namespace fs = std::filesystem;

TEST(LoopbackTest, DecidedOnTheResolvedAddress) {
  EXPECT_TRUE(observe::IsLoopbackHost("127.0.0.1"));
  EXPECT_TRUE(observe::IsLoopbackHost("127.3.4.5"));
  EXPECT_TRUE(observe::IsLoopbackHost("::1"));
  EXPECT_TRUE(observe::IsLoopbackHost("[::1]"));
  EXPECT_TRUE(observe::IsLoopbackHost("localhost"));
  // The name: a DNS name that merely starts with "127.".
  EXPECT_FALSE(observe::IsLoopbackHost("127.attacker.test"));
  EXPECT_FALSE(observe::IsLoopbackHost("10.0.0.1"));
  EXPECT_FALSE(observe::IsLoopbackHost("0.0.0.0"));
  EXPECT_FALSE(observe::IsLoopbackHost(""));
  observe::HttpServerOptions o;
  o.listen = "127.attacker.test:0";
  auto server = observe::HttpServer::Start(o, {});
  ASSERT_FALSE(server.ok());
  EXPECT_NE(server.status().message().find("requires a token"),
            std::string::npos);
}

TEST(NodeNameTest, OnlyPlainNames) {
  for (const char* ok : {"dn1", "node-07", "gpu_a.rack3", "n"}) {
    EXPECT_TRUE(control::ValidateNodeName(ok).ok()) << ok;
  }
  for (const std::string& bad :
       std::vector<std::string>{"", "../etc", "a/b", "-x", ".hidden", "a b",
                                "a\nb", std::string(64, 'x')}) {
    EXPECT_FALSE(control::ValidateNodeName(bad).ok()) << bad;
  }
}

// Starts `argv0` (the path of an executable) running `script` with sh.
pid_t Spawn(const std::string& argv0, const std::string& script) {
  pid_t pid = fork();
  if (pid == 0) {
    setpgid(0, 0);  // its own group: Reap() kills what it started too
    execl(argv0.c_str(), argv0.c_str(), "-c", script.c_str(),
          static_cast<char*>(nullptr));
    _exit(127);
  }
  return pid;
}

void Reap(pid_t pid) {
  killpg(pid, SIGKILL);
  kill(pid, SIGKILL);
  waitpid(pid, nullptr, 0);
}

class InjectTargetTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() /
           ("strata-sec-inject-" + std::to_string(getpid()));
    fs::remove_all(dir_);
    fs::create_directories(dir_);
    // A stand-in for the worker: a shell whose executable is named
    // strata-worker, so its children have the lineage of ranks.
    worker_ = (dir_ / "strata-worker").string();
    fs::copy_file("/bin/sh", worker_);
    fs::permissions(worker_, fs::perms::owner_all | fs::perms::group_exec |
                                 fs::perms::others_exec);
    job_ = "job-sec-" + std::to_string(getpid());
  }
  void TearDown() override {
    for (pid_t p : pids_) Reap(p);
    fs::remove_all(dir_);
  }
  // Waits until FindRank's answer is not NotFound (processes starting).
  StatusOr<std::vector<pid_t>> Find(int rank) {
    StatusOr<std::vector<pid_t>> r = absl::NotFoundError("");
    for (int i = 0; i < 200; ++i) {
      r = fault::FindRank(job_, rank, "strata-worker");
      if (!absl::IsNotFound(r.status())) return r;
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    return r;
  }
  std::string Env(int rank) {
    return "env STRATA_JOB_ID=" + job_ + " RANK=" + std::to_string(rank) +
           " sleep 30";
  }
  fs::path dir_;
  std::string worker_, job_;
  std::vector<pid_t> pids_;
};

TEST_F(InjectTargetTest, ADecoyWithTheVariablesIsNotARank) {
  // The attack: a process that merely copied STRATA_JOB_ID and RANK (as
  // `nobody` when root can switch to it).
  const std::string decoy =
      geteuid() == 0 ? "exec setpriv --reuid=65534 --regid=65534 --clear-groups " +
                           Env(0)
                     : "exec " + Env(0);
  pids_.push_back(Spawn("/bin/sh", decoy));
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  auto found = fault::FindRank(job_, 0, "strata-worker");
  EXPECT_TRUE(absl::IsNotFound(found.status())) << found.status();
  EXPECT_NE(found.status().message().find("started by strata-worker"),
            std::string::npos);
  // The rank a worker started is found, and named.
  pids_.push_back(Spawn(worker_, Env(0) + "; true"));
  auto rank = Find(0);
  ASSERT_TRUE(rank.ok()) << rank.status();
  ASSERT_EQ(rank->size(), 1u);
  const std::string named = fault::DescribeProcess((*rank)[0]);
  EXPECT_NE(named.find("child of strata-worker"), std::string::npos) << named;
}

TEST_F(InjectTargetTest, AmbiguousMatchesAreRefused) {
  pids_.push_back(Spawn(worker_, Env(1) + " & " + Env(1) + " & wait"));
  StatusOr<std::vector<pid_t>> r = absl::NotFoundError("");
  for (int i = 0; i < 200; ++i) {
    r = fault::FindRank(job_, 1, "strata-worker");
    if (absl::IsFailedPrecondition(r.status())) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  ASSERT_TRUE(absl::IsFailedPrecondition(r.status())) << r.status();
  EXPECT_NE(r.status().message().find("ambiguous"), std::string::npos);
  EXPECT_NE(r.status().message().find("Nothing signalled"), std::string::npos);
}

}  // namespace
}  // namespace strata
