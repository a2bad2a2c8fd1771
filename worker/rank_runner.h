// What the worker agent needs of the ranks it runs: start them from launch
// orders, stop attempts, and report their states and new output.
// RankSupervisor is the implementation (fork/exec on this node); unit tests
// of the agent use a fake. Implementations run on the agent's thread.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "proto/control.pb.h"

namespace strata::worker {

class RankRunner {
 public:
  virtual ~RankRunner() = default;

  // Starts one rank unless it is already held. A rank that cannot start is
  // held as RANK_FAILED_TO_START with the reason, not returned.
  virtual void Launch(const control::RankLaunch& order) = 0;
  // Stops every rank of attempt "<job>/<attempt>" (SIGTERM, SIGKILL after
  // `grace_ms`) and forgets the attempt once they have exited and their
  // output has been collected and committed.
  virtual void Stop(const std::string& attempt_key, int64_t grace_ms) = 0;
  // In-place restart (HeartbeatReply.replace, docs/fault.md "In-place
  // restart"): kills the rank of `order` if it still runs (SIGKILL, also
  // when stopped), forgets it and starts it again from `order`; nothing
  // when the rank held already has order.generation() or a newer one, or
  // its attempt is not held or is being stopped. Runners that cannot do it
  // ignore the order (the coordinator then restarts the attempt when the
  // replacement never reports).
  virtual void Replace(const control::RankLaunch& order) { (void)order; }
  // Notices exits, escalates overdue stops, forgets finished attempts.
  virtual void Poll() = 0;

  // Every rank held (running, exited or failed to start).
  virtual std::vector<control::RankReport> Reports() const = 0;
  // New output since the last CommitLogs(), at most `max_bytes` in total;
  // collecting again before a commit returns the same output again.
  virtual std::vector<control::LogChunk> CollectLogs(size_t max_bytes) = 0;
  // The output last collected was accepted by the coordinator.
  virtual void CommitLogs() = 0;
  // True when a rank changed state since the last call.
  virtual bool TakeDirty() = 0;
  // Ranks currently running.
  virtual int running() const = 0;
};

}  // namespace strata::worker
