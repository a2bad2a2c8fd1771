#include "common/subprocess.h"

#include <fcntl.h>
#include <grp.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"

extern char** environ;

namespace strata {
namespace {

// PATH lookup before fork (execvp may allocate in the child).
std::string ResolveProgram(const std::string& prog) {
  if (prog.find('/') != std::string::npos) return prog;
  const char* path = getenv("PATH");
  for (absl::string_view dir :
       absl::StrSplit(path ? path : "/usr/bin:/bin", ':')) {
    std::string candidate = absl::StrCat(dir.empty() ? "." : dir, "/", prog);
    if (access(candidate.c_str(), X_OK) == 0) return candidate;
  }
  return prog;  // exec fails with ENOENT and names it
}

// The descriptors the child gets as stdin/stdout/stderr; -1 = inherited.
// Owns the ones it opened.
class Streams {
 public:
  ~Streams() {
    for (int fd : opened_) close(fd);
  }
  Status Open(const Redirect& r, int target) {
    if (r.fd >= 0) {
      fds_[target] = r.fd;
    } else if (!r.path.empty()) {
      const int flags = target == 0 ? O_RDONLY | O_CLOEXEC
                                    : O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC |
                                          O_NOFOLLOW;
      const int fd = open(r.path.c_str(), flags, 0644);
      if (fd < 0) return ErrnoToStatus(errno, "open " + r.path);
      opened_.push_back(fd);
      fds_[target] = fd;
    }
    return absl::OkStatus();
  }
  int fd(int target) const { return fds_[target]; }

 private:
  int fds_[3] = {-1, -1, -1};
  std::vector<int> opened_;
};

// What the child reports on the status pipe when it cannot exec.
struct ChildError {
  int stage;  // kStageChdir, kStageDup, kStageExec, kStageUser
  int err;    // errno
};
constexpr int kStageChdir = 0, kStageDup = 1, kStageExec = 2, kStageUser = 3;

[[noreturn]] void ReportAndExit(int status_fd, int stage) {
  ChildError e{stage, errno};
  (void)!write(status_fd, &e, sizeof(e));
  _exit(127);
}

}  // namespace

StatusOr<pid_t> ForkInOwnGroup() {
  const pid_t parent = getpid();
  const pid_t pid = fork();
  if (pid < 0) return ErrnoToStatus(errno, "fork");
  if (pid == 0) {
    setpgid(0, 0);
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (getppid() != parent) _exit(kOrphanExitCode);  // parent already gone
    return 0;
  }
  // Also from the parent, so a killpg(pid) right after this returns cannot
  // miss a child that has not run setpgid yet; whichever runs first wins.
  setpgid(pid, pid);
  return pid;
}

StatusOr<pid_t> StartSubprocess(const SubprocessOptions& options) {
  if (options.argv.empty() || options.argv[0].empty()) {
    return absl::InvalidArgumentError("subprocess: empty argv");
  }
  const std::string program = ResolveProgram(options.argv[0]);
  std::vector<std::string> args = options.argv;
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  std::vector<std::string> env_strings;
  std::vector<char*> envp;
  char** child_env = environ;
  if (options.env) {
    env_strings = *options.env;
    for (auto& s : env_strings) envp.push_back(s.data());
    envp.push_back(nullptr);
    child_env = envp.data();
  }
  Streams streams;
  RETURN_IF_ERROR(streams.Open(options.in, 0));
  RETURN_IF_ERROR(streams.Open(options.out, 1));
  RETURN_IF_ERROR(streams.Open(options.err, 2));
  int status_pipe[2];
  if (pipe2(status_pipe, O_CLOEXEC) != 0) return ErrnoToStatus(errno, "pipe2");

  auto pid = ForkInOwnGroup();
  if (!pid.ok()) {
    close(status_pipe[0]);
    close(status_pipe[1]);
    return pid.status();
  }
  if (*pid == 0) {
    // Child: async-signal-safe calls only until exec.
    for (int target = 0; target < 3; ++target) {
      const int fd = streams.fd(target);
      if (fd < 0) continue;
      if (fd == target) {  // dup2 would keep a close-on-exec flag
        const int flags = fcntl(fd, F_GETFD);
        if (flags < 0 || fcntl(fd, F_SETFD, flags & ~FD_CLOEXEC) < 0) {
          ReportAndExit(status_pipe[1], kStageDup);
        }
      } else if (dup2(fd, target) < 0) {
        ReportAndExit(status_pipe[1], kStageDup);
      }
    }
    if (options.user) {
      // Groups first, while still privileged; the uid last. Changing
      // credentials clears the parent-death signal (prctl(2)): set again.
      const gid_t gid = options.user->gid;
      if (setgroups(1, &gid) != 0 || setgid(gid) != 0 ||
          setuid(options.user->uid) != 0 ||
          prctl(PR_SET_PDEATHSIG, SIGKILL) != 0) {
        ReportAndExit(status_pipe[1], kStageUser);
      }
    }
    if (!options.cwd.empty() && chdir(options.cwd.c_str()) != 0) {
      ReportAndExit(status_pipe[1], kStageChdir);
    }
    signal(SIGPIPE, SIG_DFL);
    sigset_t none;
    sigemptyset(&none);
    sigprocmask(SIG_SETMASK, &none, nullptr);
    execve(program.c_str(), argv.data(), child_env);
    ReportAndExit(status_pipe[1], kStageExec);
  }
  close(status_pipe[1]);
  ChildError e{};
  ssize_t n;
  do {
    n = read(status_pipe[0], &e, sizeof(e));
  } while (n < 0 && errno == EINTR);
  close(status_pipe[0]);
  if (n != sizeof(e)) return *pid;  // EOF: exec closed the pipe
  while (waitpid(*pid, nullptr, 0) < 0 && errno == EINTR) {
  }
  switch (e.stage) {
    case kStageChdir:
      return ErrnoToStatus(e.err, "chdir " + options.cwd);
    case kStageDup:
      return ErrnoToStatus(e.err, "redirecting the standard streams");
    case kStageUser:
      return ErrnoToStatus(e.err,
                           absl::StrCat("switching to uid ", options.user->uid,
                                        " gid ", options.user->gid));
    default:
      return ErrnoToStatus(e.err, "exec " + program);
  }
}

}  // namespace strata
