#include "common/subprocess.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>

#include "gtest/gtest.h"

namespace strata {
namespace {

std::string ReadFile(const std::string& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

SubprocessOptions Argv(std::vector<std::string> argv) {
  SubprocessOptions o;
  o.argv = std::move(argv);
  return o;
}

// Waits for `pid` and returns its raw wait status.
int Reap(pid_t pid) {
  int status = 0;
  EXPECT_EQ(waitpid(pid, &status, 0), pid);
  return status;
}

class SubprocessTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/strata-subprocess-XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }
  std::string dir_;
};

TEST_F(SubprocessTest, RunsShellAndReturnsItsExitStatus) {
  auto pid = StartSubprocess(Argv({"/bin/sh", "-c", "exit 3"}));
  ASSERT_TRUE(pid.ok()) << pid.status();
  const int status = Reap(*pid);
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 3);
}

TEST_F(SubprocessTest, LooksProgramUpInPath) {
  auto pid = StartSubprocess(Argv({"sh", "-c", "exit 4"}));
  ASSERT_TRUE(pid.ok()) << pid.status();
  EXPECT_EQ(WEXITSTATUS(Reap(*pid)), 4);
}

TEST_F(SubprocessTest, SetsEnvironmentWorkingDirectoryAndRedirects) {
  std::ofstream(dir_ + "/in") << "from stdin\n";
  SubprocessOptions o;
  o.argv = {"/bin/sh", "-c", "echo \"$GREETING\"; pwd; cat; echo oops >&2"};
  o.env = std::vector<std::string>{"GREETING=hello", "PATH=/usr/bin:/bin"};
  o.cwd = dir_;
  o.in.path = dir_ + "/in";
  o.out.path = dir_ + "/out";
  o.err.path = dir_ + "/err";
  std::ofstream(dir_ + "/out") << "kept\n";  // appended to, not truncated
  auto pid = StartSubprocess(o);
  ASSERT_TRUE(pid.ok()) << pid.status();
  EXPECT_EQ(WEXITSTATUS(Reap(*pid)), 0);
  EXPECT_EQ(ReadFile(dir_ + "/out"), "kept\nhello\n" + dir_ + "\nfrom stdin\n");
  EXPECT_EQ(ReadFile(dir_ + "/err"), "oops\n");
}

TEST_F(SubprocessTest, RedirectsToAnOpenDescriptor) {
  int fds[2];
  ASSERT_EQ(pipe2(fds, O_CLOEXEC), 0);
  SubprocessOptions o;
  o.argv = {"/bin/sh", "-c", "echo listening tcp://x:1"};
  o.out.fd = fds[1];
  auto pid = StartSubprocess(o);
  close(fds[1]);
  ASSERT_TRUE(pid.ok()) << pid.status();
  char buf[64] = {0};
  std::string got;
  ssize_t n;
  while ((n = read(fds[0], buf, sizeof(buf))) > 0) got.append(buf, n);
  close(fds[0]);
  Reap(*pid);
  EXPECT_EQ(got, "listening tcp://x:1\n");
}

TEST_F(SubprocessTest, ChildLeadsItsOwnProcessGroup) {
  auto pid = StartSubprocess(Argv({"/bin/sh", "-c", "exec sleep 30"}));
  ASSERT_TRUE(pid.ok()) << pid.status();
  EXPECT_EQ(getpgid(*pid), *pid);
  EXPECT_NE(getpgid(*pid), getpgrp());
  ASSERT_EQ(killpg(*pid, SIGKILL), 0);
  const int status = Reap(*pid);
  ASSERT_TRUE(WIFSIGNALED(status));
  EXPECT_EQ(WTERMSIG(status), SIGKILL);
}

TEST_F(SubprocessTest, MissingProgramIsNotFoundNamingIt) {
  auto pid = StartSubprocess(Argv({dir_ + "/no-such-program"}));
  ASSERT_FALSE(pid.ok());
  EXPECT_EQ(pid.status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(pid.status().message(), "exec " + dir_ +
                                        "/no-such-program: No such file or "
                                        "directory");
  // The failed child was reaped: no child is left.
  EXPECT_EQ(waitpid(-1, nullptr, WNOHANG), -1);
  EXPECT_EQ(errno, ECHILD);
}

TEST_F(SubprocessTest, BadWorkingDirectoryAndRedirectAreNamed) {
  SubprocessOptions bad_cwd = Argv({"/bin/true"});
  bad_cwd.cwd = dir_ + "/missing";
  auto pid = StartSubprocess(bad_cwd);
  ASSERT_FALSE(pid.ok());
  EXPECT_EQ(pid.status().message(),
            "chdir " + dir_ + "/missing: No such file or directory");
  SubprocessOptions o = Argv({"/bin/true"});
  o.out.path = dir_ + "/missing/out";
  pid = StartSubprocess(o);
  ASSERT_FALSE(pid.ok());
  EXPECT_EQ(pid.status().message(),
            "open " + dir_ + "/missing/out: No such file or directory");
  EXPECT_EQ(StartSubprocess(SubprocessOptions{}).status().code(),
            absl::StatusCode::kInvalidArgument);
}

TEST_F(SubprocessTest, ChildDiesWhenTheStartingThreadExits) {
  StatusOr<pid_t> pid = absl::UnknownError("not started");
  std::thread t([&] {
    pid = StartSubprocess(Argv({"/bin/sh", "-c", "exec sleep 30"}));
  });
  t.join();
  ASSERT_TRUE(pid.ok()) << pid.status();
  const int status = Reap(*pid);  // returns only because it was killed
  ASSERT_TRUE(WIFSIGNALED(status));
  EXPECT_EQ(WTERMSIG(status), SIGKILL);
}

// Double fork: A (a subreaper, so orphans are re-parented to it) forks B,
// B starts C and exits. C must then get SIGKILL; A reaps C and reports.
TEST_F(SubprocessTest, ChildDiesWhenTheParentProcessDies) {
  const pid_t a = fork();
  ASSERT_GE(a, 0);
  if (a == 0) {
    prctl(PR_SET_CHILD_SUBREAPER, 1);
    int fds[2];
    if (pipe(fds) != 0) _exit(10);
    const pid_t b = fork();
    if (b == 0) {
      auto c = StartSubprocess(Argv({"/bin/sh", "-c", "exec sleep 30"}));
      if (!c.ok()) _exit(11);
      const pid_t cpid = *c;
      (void)!write(fds[1], &cpid, sizeof(cpid));
      _exit(0);
    }
    pid_t c = -1;
    if (read(fds[0], &c, sizeof(c)) != sizeof(c)) _exit(12);
    if (waitpid(b, nullptr, 0) != b) _exit(13);
    int status = 0;
    if (waitpid(c, &status, 0) != c) _exit(14);
    _exit(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL ? 0 : 15);
  }
  const int status = Reap(a);
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 0)
      << "10-14: setup failed; 15: the orphaned child was not SIGKILLed";
}

}  // namespace
}  // namespace strata
