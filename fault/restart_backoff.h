// How long a job waits before its next attempt after attempts failed in a
// row (issue 34: a command that exits 1 at once restarted up to 1,000 times
// back to back). Exponential with a cap, reset by a healthy attempt:
//
//   delay(n) = 0                                     n <= immediate_restarts
//            = min(max_ms, initial_ms x multiplier^(n - immediate_restarts - 1))
//
// where n counts consecutive failed attempts; an attempt that made progress
// (completed a training step) or ran at least `healthy_ms` before failing
// starts the count again (n = 1): a storm is attempts that fail without
// training, while a long job's faults minutes apart (a lost node, a hang)
// are each a first failure, restarted at once. The shape and
// the defaults' cap and reset period are Kubernetes' CrashLoopBackOff
// (kubernetes.io, "Pod Lifecycle", container restart policy: delays doubling
// from 10 s, capped at 5 minutes, reset after 10 minutes of running); the
// first restart is immediate and the next starts at 1 s, because a training
// job's single transient failure (a lost node) should cost no idle time.
// Pure: time is passed in (steady ms); one thread; thread-compatible.
#pragma once

#include <cstdint>
#include <string>

namespace strata::fault {

struct RestartBackoffOptions {
  int immediate_restarts = 1;   // consecutive failures restarted at once
  int64_t initial_ms = 1000;    // the first delayed restart
  double multiplier = 2.0;
  int64_t max_ms = 300000;      // cap: 5 minutes
  int64_t healthy_ms = 600000;  // an attempt this long resets the count,
                                // as one that made progress does
};

// delay(consecutive) above; 0 for consecutive <= 0.
int64_t RestartDelayMs(int consecutive, const RestartBackoffOptions& options);

// One job's streak of failed attempts.
class RestartBackoff {
 public:
  explicit RestartBackoff(RestartBackoffOptions options = {})
      : options_(options) {}

  struct Decision {
    int consecutive = 0;       // failed attempts in a row, this one included
    int64_t delay_ms = 0;      // before the next attempt may be placed
    int64_t not_before_ms = 0;  // steady time it may be placed from
    bool reset = false;        // the failed attempt was healthy
    // "restart at once (failure 1 in a row)" or "next attempt in 8.0 s
    // (backoff: failure 5 in a row, cap 300 s)": for events and status.
    std::string Describe() const;
  };

  // The attempt failed at steady time `now_ms` after running `ran_ms`
  // (0 if it never started); `progressed`: it completed a step.
  Decision OnFailure(int64_t ran_ms, bool progressed, int64_t now_ms);
  // Whether the next attempt may be placed at steady time `now_ms`.
  bool Ready(int64_t now_ms) const { return now_ms >= not_before_ms_; }
  int64_t not_before_ms() const { return not_before_ms_; }
  int consecutive() const { return consecutive_; }

 private:
  RestartBackoffOptions options_;
  int consecutive_ = 0;
  int64_t not_before_ms_ = 0;
};

}  // namespace strata::fault
