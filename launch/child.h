// The command strata-exec runs, forked *before* MPI_Init.
//
// Why: Open MPI discourages fork() in an initialised MPI process (memory
// registered with UCX/libfabric/verbs, progress threads, PMIx sockets; see
// docs/launch.md). Forking before MPI_Init copies a single-threaded process
// with no MPI state, so nothing MPI owns is ever duplicated. The child then
// waits on a pipe; once the parent has learned its rank and rendezvous
// facts through MPI, Release() sends the environment and the child execs
// the command. The child:
// - runs in its own process group (signals reach the command's whole tree),
// - gets SIGKILL if strata-exec dies (PR_SET_PDEATHSIG), so an mpirun abort
//   that SIGKILLs strata-exec never leaves the command running (both from
//   common/subprocess.h ForkInOwnGroup),
// - exits 127 with a message on stderr if the command cannot be executed,
// - exits quietly (code 125, without running the command) if the parent
//   closes the pipe without Release() (setup failed).
//
// Thread-compatibility: use from the main thread only. Start() must be
// called while the process has a single thread.
#pragma once

#include <sys/types.h>

#include <memory>
#include <string>
#include <vector>

#include "common/status.h"

namespace strata::launch {

class PreforkedChild {
 public:
  // Forks; `argv[0]` is looked up in PATH at exec time. InvalidArgument for
  // an empty argv, Internal when pipe/fork fail.
  static StatusOr<std::unique_ptr<PreforkedChild>> Start(
      std::vector<std::string> argv);

  // Not released: the child exits without running the command. Released and
  // still running: SIGKILLs its process group. Always reaps it.
  ~PreforkedChild();
  PreforkedChild(const PreforkedChild&) = delete;
  PreforkedChild& operator=(const PreforkedChild&) = delete;

  // Sends `env` ("NAME=value") and lets the child exec. Once only.
  Status Release(const std::vector<std::string>& env);

  // Blocks until the child exits; restarts on EINTR (signals are forwarded
  // by the handler of ForwardSignalsTo). Returns the exit code, or
  // 128 + signal number when the child was killed by a signal.
  StatusOr<int> Wait();

  pid_t pid() const { return pid_; }

 private:
  PreforkedChild(pid_t pid, int go_fd) : pid_(pid), go_fd_(go_fd) {}
  pid_t pid_;
  int go_fd_;  // write end of the pipe the child waits on; -1 once closed
  bool reaped_ = false;
};

// Installs handlers that forward SIGINT, SIGTERM, SIGHUP, SIGUSR1 and
// SIGUSR2 to process group `pgid` (the child's). The handler only calls
// kill(2), which is async-signal-safe.
void ForwardSignalsTo(pid_t pgid);

}  // namespace strata::launch
