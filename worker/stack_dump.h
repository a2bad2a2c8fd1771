// Stacks of a hung attempt's ranks (docs/fault.md "Hangs"): the main
// thread's backtrace of each rank, taken by `eu-stack -p PID` (elfutils,
// installed by deploy/install-deps.sh; `gdb -p PID -batch` when only gdb is
// there) in a child process, so the worker's heartbeat loop never waits on
// ptrace. Both leave a stopped rank stopped and resume a running one when
// they detach.
//
// A Python rank (its /proc/PID/exe named python*) also gets its Python
// stack from `py-spy dump --nonblocking` (PyPI; deploy/python-venv.sh
// installs it), found on the rank's own PATH (/proc/PID/environ), next to
// its argv[0], then on the worker's PATH; it reads the stopped or running
// process's memory without pausing it. Its text follows the native one as
// "python: <frames>" (CompactPyStack); without py-spy there is none.
//
// Start() forks the debugger with its output in an anonymous file; Poll()
// returns the dumps that finished, and kills a debugger past `budget_ms`
// (its dump then says so). Neither tool installed: Start() returns "" at
// once as the text. Single thread (the worker's loop).
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace strata::worker {

class StackDumps {
 public:
  explicit StackDumps(int64_t budget_ms = 3000) : budget_ms_(budget_ms) {}
  ~StackDumps();
  StackDumps(const StackDumps&) = delete;
  StackDumps& operator=(const StackDumps&) = delete;

  // Starts a dump of `pid` under `id`; returns the text at once when no
  // dump can be taken (no tool: empty; fork failed: the error).
  std::optional<std::string> Start(int id, int pid, int64_t now_ms);

  // Finished (or timed-out) dumps: id -> compact backtrace text.
  std::map<int, std::string> Poll(int64_t now_ms);

  bool empty() const { return running_.empty(); }

 private:
  struct Child {
    pid_t pid = -1;
    int out_fd = -1;
    bool done = false;
  };
  struct Running {
    Child native, python;  // python.pid -1: no Python stack taken
    int64_t deadline_ms = 0;
  };
  // Kills the dumpers of `r` still running, waits for them, closes their
  // output files.
  static void Reap(Running& r);

  int64_t budget_ms_;
  std::map<int, Running> running_;
};

// "#0 futex_wait (...) at file.cc:12 | #1 ..." from a gdb or eu-stack
// backtrace: frame lines only, addresses and argument lists dropped, at most
// `max_chars`. Pure; exposed for tests.
std::string CompactBacktrace(const std::string& raw, size_t max_chars = 1500);

// "train_step (train.py:40) | main (train.py:77)" from `py-spy dump`: the
// first thread's frames (the main thread), innermost first, at most
// `max_chars`. Pure; exposed for tests.
std::string CompactPyStack(const std::string& raw, size_t max_chars = 1500);

}  // namespace strata::worker
