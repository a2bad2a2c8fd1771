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
// "python: <frames>" (CompactPyStack).
//
// Without py-spy, or when it gives no frames, the stack comes from Python's
// own faulthandler: a rank that imported the strata package under a worker
// registered it on signal SIGRTMIN+kPyStackSignalOffset, writing to
// "pystack-<pid>" in the directory of its STRATA_PLAN file (python/strata/
// _pystack.py; the file exists only once the handler is registered, so no
// other process is ever sent the signal). Start() truncates that file and
// sends the signal to a rank that is not stopped, and starts the debuggers
// only once the dump is written (or kFaultHandlerGraceMs passed), so a
// ptrace attach never swallows the signal. A stopped rank cannot run the
// handler: its Python stack is py-spy's or none.
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

// The faulthandler signal is SIGRTMIN plus this (python/strata/_pystack.py
// uses the same number).
inline constexpr int kPyStackSignalOffset = 5;
// How long Start() waits for a faulthandler dump before the debuggers
// attach anyway (the handler writes within a millisecond of being run; the
// rest is the rank being scheduled on a loaded machine).
inline constexpr int64_t kFaultHandlerGraceMs = 300;

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
    Child native, python;  // python.pid -1: no py-spy started
    int64_t deadline_ms = 0;
    // With a faulthandler dump requested: its file, when the signal went,
    // when the file was first seen non-empty, and the dumpers to start
    // after it (pending until then).
    std::string fh_path;
    int64_t fh_sent_ms = -1, fh_seen_ms = -1;
    std::vector<std::string> native_argv, pyspy_argv;
    bool pending = false;
  };
  // Starts the dumpers of `r` (native, py-spy when found); false with
  // `error` set when the native one cannot be started.
  static bool StartDumpers(Running& r, std::string* error);
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

// The same form from a faulthandler dump (`File "/x/train.py", line 40 in
// train_step` lines): the "Current thread" (the one that ran the handler,
// the main thread for a signal sent to the process), else the first;
// file names without their directories. Pure; exposed for tests.
std::string CompactFaultHandlerStack(const std::string& raw,
                                     size_t max_chars = 1500);

}  // namespace strata::worker
