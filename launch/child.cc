#include "launch/child.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstring>

#include "common/subprocess.h"

namespace strata::launch {
namespace {

// Child side: wait for the go message, then exec. Runs in a fork of a
// single-threaded process, so ordinary library calls are safe here.
[[noreturn]] void ChildMain(int go_fd, std::vector<std::string> argv) {
  // Message: 'G' then NUL-terminated "NAME=value" strings, then EOF.
  std::string msg;
  char buf[65536];
  for (;;) {
    ssize_t n = read(go_fd, buf, sizeof(buf));
    if (n > 0) {
      msg.append(buf, n);
    } else if (n == 0) {
      break;
    } else if (errno != EINTR) {
      _exit(125);
    }
  }
  close(go_fd);
  if (msg.empty() || msg[0] != 'G') _exit(125);
  std::vector<char*> envp;
  for (size_t i = 1; i < msg.size();) {
    envp.push_back(&msg[i]);
    i = msg.find('\0', i);
    if (i == std::string::npos) break;
    ++i;
  }
  envp.push_back(nullptr);
  std::vector<char*> args;
  for (auto& a : argv) args.push_back(a.data());
  args.push_back(nullptr);
  execvpe(args[0], args.data(), envp.data());
  std::fprintf(stderr, "strata-exec: cannot run '%s': %s\n", args[0],
               std::strerror(errno));
  _exit(127);
}

std::atomic<pid_t> g_forward_pgid{0};

void Forward(int sig) {
  const pid_t pgid = g_forward_pgid.load();
  if (pgid > 0) kill(-pgid, sig);
}

}  // namespace

StatusOr<std::unique_ptr<PreforkedChild>> PreforkedChild::Start(
    std::vector<std::string> argv) {
  if (argv.empty() || argv[0].empty())
    return absl::InvalidArgumentError("no command to run");
  int fds[2];
  if (pipe2(fds, O_CLOEXEC) != 0) return ErrnoToStatus(errno, "pipe2");
  // Own process group and PR_SET_PDEATHSIG (common/subprocess.h); an
  // orphaned child exits with kOrphanExitCode (125), as for a failed setup.
  auto pid = ForkInOwnGroup();
  if (!pid.ok()) {
    close(fds[0]);
    close(fds[1]);
    return pid.status();
  }
  if (*pid == 0) {
    close(fds[1]);
    ChildMain(fds[0], std::move(argv));
  }
  close(fds[0]);
  return std::unique_ptr<PreforkedChild>(new PreforkedChild(*pid, fds[1]));
}

PreforkedChild::~PreforkedChild() {
  const bool released = go_fd_ < 0;
  if (go_fd_ >= 0) close(go_fd_);
  if (reaped_) return;
  if (released) kill(-pid_, SIGKILL);
  while (waitpid(pid_, nullptr, 0) < 0 && errno == EINTR) {
  }
}

Status PreforkedChild::Release(const std::vector<std::string>& env) {
  if (go_fd_ < 0) return absl::FailedPreconditionError("already released");
  std::string msg = "G";
  for (const auto& kv : env) {
    msg += kv;
    msg.push_back('\0');
  }
  // The child reads until EOF, so a large environment cannot deadlock on a
  // full pipe: it drains while we write.
  size_t off = 0;
  Status st;
  while (off < msg.size()) {
    ssize_t n = write(go_fd_, msg.data() + off, msg.size() - off);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      st = ErrnoToStatus(errno, "sending the environment to the command");
      break;
    }
    off += static_cast<size_t>(n);
  }
  close(go_fd_);
  go_fd_ = -1;
  return st;
}

StatusOr<int> PreforkedChild::Wait() {
  if (reaped_) return absl::FailedPreconditionError("already reaped");
  int status = 0;
  while (waitpid(pid_, &status, 0) < 0) {
    if (errno != EINTR) return ErrnoToStatus(errno, "waitpid");
  }
  reaped_ = true;
  if (WIFEXITED(status)) return WEXITSTATUS(status);
  if (WIFSIGNALED(status)) return 128 + WTERMSIG(status);
  return absl::InternalError("child stopped in an unexpected state");
}

void ForwardSignalsTo(pid_t pgid) {
  g_forward_pgid = pgid;
  struct sigaction sa {};
  sa.sa_handler = Forward;
  sigemptyset(&sa.sa_mask);
  sa.sa_flags = 0;  // no SA_RESTART: waitpid returns EINTR and re-waits
  for (int sig : {SIGINT, SIGTERM, SIGHUP, SIGUSR1, SIGUSR2})
    sigaction(sig, &sa, nullptr);
}

}  // namespace strata::launch
