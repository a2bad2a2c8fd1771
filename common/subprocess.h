// Starting child processes: one fork/exec used by the worker (ranks),
// strata-exec (the command, forked before MPI_Init), `strata run` (the
// coordinator and workers) and the multi-process tests.
//
// Every child
// - runs in its own process group (pgid == pid), set by the child and again
//   by the parent, so killpg(pid, ...) reaches it as soon as the start call
//   returns (no race with the child's first instructions);
// - gets SIGKILL when the thread that started it exits (PR_SET_PDEATHSIG;
//   Linux ties it to the forking *thread*, so start children from a
//   long-lived thread). If the parent died before the child armed that, the
//   child exits at once with kOrphanExitCode.
//
// Thread-compatible: may be called from any thread of a multi-threaded
// process; between fork and exec the child makes async-signal-safe calls
// only (all allocation happens before fork).
#pragma once

#include <sys/types.h>

#include <optional>
#include <string>
#include <vector>

#include "common/status.h"

namespace strata {

// Exit code of a child whose parent was gone before PR_SET_PDEATHSIG was set.
inline constexpr int kOrphanExitCode = 125;

// Where one standard stream of a child goes. Neither set: inherited.
struct Redirect {
  // Opened by the parent before fork: stdin read-only; stdout and stderr
  // write-only, created (0644) and appended to.
  std::string path;
  // An open descriptor, duplicated onto the stream; the caller keeps it.
  // Wins over `path`.
  int fd = -1;
};

struct SubprocessOptions {
  // argv[0] is a path, or a name looked up in this process's PATH (before
  // fork). Must not be empty.
  std::vector<std::string> argv;
  // The child's whole environment, "NAME=value" each; unset: this
  // process's environment.
  std::optional<std::vector<std::string>> env;
  // Working directory of the child; empty: this process's.
  std::string cwd;
  Redirect in, out, err;
  // Run as this user and group (no supplementary groups) instead of this
  // process's; requires privilege (root). The redirects are opened before
  // the switch, by this process (docs/security.md "Ranks as another user").
  struct User {
    uid_t uid = 0;
    gid_t gid = 0;
  };
  std::optional<User> user;
};

// Forks and execs `options.argv` as described above (SIGPIPE back to its
// default, signal mask cleared). Returns the child's pid once exec
// succeeded. Errors, with the errno text: InvalidArgument (empty argv),
// the open(2) error naming a redirect path, "fork: ...", "chdir DIR: ...",
// "switching to uid U gid G: ...", or "exec PROGRAM: ..." (NotFound for a missing program); a child that
// failed to exec has been reaped.
StatusOr<pid_t> StartSubprocess(const SubprocessOptions& options);

// The fork half of StartSubprocess, for a child that must work before it
// execs (launch/child.cc): returns 0 in the child, which is already in its
// own group with PR_SET_PDEATHSIG set, and the pid in the parent.
// REQUIRES: in a multi-threaded process the child makes only
// async-signal-safe calls and ends in exec or _exit.
StatusOr<pid_t> ForkInOwnGroup();

}  // namespace strata
