// Ranks as real processes over shm, tcp and shm+tcp (STYLE.md tier 3),
// including the fault tests: SIGKILL a rank mid all-reduce and every other
// rank returns an error within its timeout; SIGSTOP a rank and its
// neighbour reports DeadlineExceeded naming it.
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"

namespace {

struct Proc {
  pid_t pid;
  FILE* out;  // the child's stdout
};

std::string RankBinary() {
  const char* dir = std::getenv("STRATA_BINARY_DIR");
  return std::string(dir ? dir : ".") + "/comm/strata_comm_rank";
}

std::string FreshDir(const std::string& name) {
  std::string dir =
      ::testing::TempDir() + "/" + name + "_" + std::to_string(getpid());
  std::string cmd = "rm -rf " + dir;
  (void)!std::system(cmd.c_str());
  return dir;
}

Proc Spawn(const std::vector<std::string>& args) {
  int fds[2];
  (void)!pipe(fds);
  pid_t pid = fork();
  if (pid == 0) {
    dup2(fds[1], 1);
    close(fds[0]);
    std::vector<char*> argv;
    for (const auto& a : args) argv.push_back(const_cast<char*>(a.c_str()));
    argv.push_back(nullptr);
    execv(argv[0], argv.data());
    _exit(127);
  }
  close(fds[1]);
  return {pid, fdopen(fds[0], "r")};
}

// Waits for exit (bounded); returns exit code, -signal, or 999 on timeout.
int Join(Proc& p, std::string* output, int timeout_s = 60) {
  const auto end =
      std::chrono::steady_clock::now() + std::chrono::seconds(timeout_s);
  int status = 0;
  while (waitpid(p.pid, &status, WNOHANG) == 0) {
    if (std::chrono::steady_clock::now() > end) {
      kill(p.pid, SIGKILL);
      waitpid(p.pid, &status, 0);
      return 999;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  char buf[4096];
  size_t n;
  while ((n = fread(buf, 1, sizeof(buf), p.out)) > 0) output->append(buf, n);
  fclose(p.out);
  return WIFEXITED(status) ? WEXITSTATUS(status) : -WTERMSIG(status);
}

// `slow_ms` replaces the timeout of every rank except `fast_rank` (so that
// rank times out first, deterministically).
std::vector<Proc> Start(const std::string& transport, int n,
                        const std::string& mode, int timeout_ms,
                        const std::string& nodes = "", int fast_rank = -1,
                        int slow_ms = 0) {
  const std::string dir = FreshDir(transport + mode);
  std::vector<Proc> procs;
  for (int r = 0; r < n; ++r) {
    std::vector<std::string> args = {
        RankBinary(),
        transport,
        dir,
        std::to_string(r),
        std::to_string(n),
        mode,
        std::to_string(fast_rank >= 0 && r != fast_rank ? slow_ms
                                                        : timeout_ms)};
    if (!nodes.empty()) args.push_back(nodes);
    procs.push_back(Spawn(args));
  }
  return procs;
}

void WaitReady(std::vector<Proc>& procs) {
  for (auto& p : procs) {
    char line[64] = {0};
    ASSERT_NE(fgets(line, sizeof(line), p.out), nullptr);
    ASSERT_EQ(std::string(line), "READY\n");
  }
  std::this_thread::sleep_for(
      std::chrono::milliseconds(200));  // mid all-reduce
}

class MultiProcessTest : public ::testing::TestWithParam<std::string> {};

TEST_P(MultiProcessTest, FourRanksVerifyEveryAlgorithm) {
  const std::string nodes = GetParam() == "hybrid" ? "0,0,1,1" : "";
  auto procs = Start(GetParam(), 4, "verify", 20000, nodes);
  for (int r = 0; r < 4; ++r) {
    std::string out;
    EXPECT_EQ(Join(procs[r], &out), 0) << "rank " << r << ": " << out;
    EXPECT_NE(out.find("OK"), std::string::npos) << out;
  }
}

TEST_P(MultiProcessTest, SigkillOneRankOthersFailWithinTimeout) {
  const std::string nodes = GetParam() == "hybrid" ? "0,0,1,1" : "";
  const int timeout_ms = 3000;
  auto procs = Start(GetParam(), 4, "loop", timeout_ms, nodes);
  WaitReady(procs);
  const auto killed_at = std::chrono::steady_clock::now();
  kill(procs[1].pid, SIGKILL);
  for (int r = 0; r < 4; ++r) {
    std::string out;
    int code = Join(procs[r], &out, 30);
    if (r == 1) {
      EXPECT_EQ(code, -SIGKILL);
      continue;
    }
    EXPECT_EQ(code, 3) << "rank " << r << ": " << out;
    EXPECT_NE(out.find("ERROR"), std::string::npos) << out;
  }
  const double waited = std::chrono::duration<double>(
                            std::chrono::steady_clock::now() - killed_at)
                            .count();
  EXPECT_LT(waited, 2 * timeout_ms / 1000.0 + 2)
      << "ranks took too long to notice";
}

TEST_P(MultiProcessTest, SigstopOneRankNeighbourNamesIt) {
  const std::string nodes = GetParam() == "hybrid" ? "0,0,1,1" : "";
  // The rank that receives from rank 1: rank 2 in the flat ring, rank 0 in
  // the hybrid layout's intra-node ring. It gets the shortest timeout so it
  // fails first, by timeout, rather than by a neighbour's cascade.
  const int receiver = nodes.empty() ? 2 : 0;
  auto procs = Start(GetParam(), 4, "loop", 1500, nodes, receiver, 4000);
  WaitReady(procs);
  kill(procs[1].pid, SIGSTOP);
  std::vector<std::string> outs(4);
  for (int r = 0; r < 4; ++r) {
    if (r == 1) continue;
    int code = Join(procs[r], &outs[r], 30);
    EXPECT_EQ(code, 3) << "rank " << r << ": " << outs[r];
  }
  kill(procs[1].pid, SIGKILL);
  kill(procs[1].pid, SIGCONT);
  std::string ignored;
  Join(procs[1], &ignored);
  // The receiver times out naming rank 1; the others fail too, by timeout
  // or because a failed neighbour closed its sockets. On shm the 4 ranks
  // all-reduce through shared slots, so every rank waits for rank 1 itself.
  EXPECT_NE(outs[receiver].find("DEADLINE_EXCEEDED"), std::string::npos)
      << outs[receiver];
  if (GetParam() == "shm") {
    for (int r : {0, 2, 3}) {
      EXPECT_NE(outs[r].find("waiting for rank(s) 1"), std::string::npos)
          << "rank " << r << ": " << outs[r];
    }
  } else {
    EXPECT_NE(outs[receiver].find("from rank 1"), std::string::npos)
        << outs[receiver];
  }
}

INSTANTIATE_TEST_SUITE_P(Transports, MultiProcessTest,
                         ::testing::Values("shm", "tcp", "hybrid"));

}  // namespace
