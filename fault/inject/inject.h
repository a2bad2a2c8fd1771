// Fault injection from outside a rank (strata-inject, docs/fault.md):
// nothing inside the process under test is changed, so the detectors see
// what a real slow or hung process looks like.
//
// - Slow: the process is stopped and continued in a duty cycle (SIGSTOP /
//   SIGCONT) so that it runs 1/factor of the wall time: in every period of
//   P ms it runs P/factor ms and is stopped for the rest. A process that
//   computes alone slows by `factor`; waiting it does on others overlaps the
//   stops, as on a slow GPU.
// - Hang: SIGSTOP, continued after a duration (or never).
// Every path that ends an injection leaves the process continued.
#pragma once

#include <sys/types.h>

#include <atomic>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "common/status.h"

namespace strata::fault {

// Processes whose environment has STRATA_JOB_ID=`job_id` and RANK=`rank`
// (the variables every strata rank gets, docs/runtime.md), found in /proc;
// threads and the worker's own processes are not ranks. NotFound when none.
//
// With `started_by` (strata-inject passes "strata-worker"), only processes
// whose parent's executable has that name count: a rank a strata worker
// started, not any process (another user's decoy) that copied the
// variables (docs/security.md). More than one such process is ambiguous:
// FailedPrecondition naming them, nothing is chosen.
StatusOr<std::vector<pid_t>> FindRank(const std::string& job_id, int rank,
                                      const std::string& started_by = "");

// "pid 123 (uid 0, `python train.py`, child of strata-worker pid 99)": what
// strata-inject names before it signals.
std::string DescribeProcess(pid_t pid);

struct SlowOptions {
  double factor = 1.3;       // wall time / run time, > 1
  int64_t period_ms = 100;   // one stop/continue cycle
  int64_t duration_ms = -1;  // < 0: until `stop` is set
};

// Duty-cycles `pids` until `duration_ms` passed, `stop` is set or every
// process is gone; always continues them before returning. Returns the
// time the processes were stopped in all, in milliseconds.
StatusOr<int64_t> Slow(const std::vector<pid_t>& pids, const SlowOptions& o,
                       const std::atomic<bool>& stop);

// Every process below `root` in the process tree (children, their
// children, ...; not `root`), from /proc/PID/stat.
std::vector<pid_t> Descendants(pid_t root);

// A slow node: duty-cycles the processes below `root` (a worker: its ranks,
// in every attempt it starts), found afresh every period, while `root`
// lives. Same options and result as Slow.
StatusOr<int64_t> SlowChildren(pid_t root, const SlowOptions& o,
                               const std::atomic<bool>& stop);

// Stops `pids` (SIGSTOP); with duration_ms >= 0 waits that long (or until
// `stop`) and continues them. The kill error naming the pid.
Status Hang(const std::vector<pid_t>& pids, int64_t duration_ms,
            const std::atomic<bool>& stop);

}  // namespace strata::fault
