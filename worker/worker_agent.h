// The worker's behaviour towards the coordinator (docs/control-plane.md
// "Workers"): register, heartbeat, carry out the launch and stop orders of
// heartbeat replies, relay rank states, output and step telemetry, and
// re-register when the coordinator forgets the worker (it restarted).
//
//   UNREGISTERED --RegisterWorker ok--> REGISTERED --heartbeat ok--> (same)
//        ^                                  |
//        +------ reply says reregister -----+
//
// Pacing (all on the injected Clock's steady reading):
// - a report (registration or heartbeat) goes out when it is due: at start,
//   right after registering, after a rank changes state, and otherwise every
//   heartbeat interval (the coordinator's, from the registration reply;
//   `busy_report_ms` while ranks run, so output and telemetry flow);
// - each call waits up to min(2 x interval, `max_call_timeout_ms`);
// - a failed call is retried after a backoff that starts at
//   `retry_initial_ms` and doubles per consecutive failure, up to the
//   heartbeat interval (retrying less often would let the coordinator
//   declare the worker lost while it is merely slow);
// - after `coordinator_timeout_ms` without a successful call, or when the
//   coordinator rejects the registration, Step() returns the error and the
//   caller stops the ranks and exits.
// Registration lists the ranks the worker still holds, so a restarted
// coordinator re-adopts them instead of restarting their job. Orders are
// declarative (the coordinator re-sends what the worker lacks), so a lost
// reply needs no recovery here. Output is committed (RankRunner::CommitLogs)
// and telemetry forgotten only once a heartbeat carrying them was answered.
//
// Thread model: single-threaded; the owner's loop calls Step() on one
// thread. Not thread-safe. Borrows every dependency; they must outlive it.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <string>
#include <utility>

#include "common/clock.h"
#include "common/logging.h"
#include "common/status.h"
#include "control/client.h"
#include "proto/control.pb.h"
#include "worker/rank_runner.h"
#include "worker/step_source.h"

namespace strata::worker {

struct WorkerAgentOptions {
  std::string coordinator;  // endpoint, named in messages
  std::string node_name;    // identity the worker registers under
  std::string address;      // host its ranks are reached at
  control::NodeProbe probe;
  // Give up after this long without a successful call.
  int64_t coordinator_timeout_ms = 10000;
  // Heartbeat interval until the coordinator sets one.
  int64_t initial_interval_ms = 1000;
  // Report period while ranks run (capped by the interval).
  int64_t busy_report_ms = 200;
  // First retry delay after a failed call; doubles up to the interval.
  int64_t retry_initial_ms = 100;
  int64_t max_call_timeout_ms = 5000;
  // Relayed output per heartbeat; the rest follows with the next one.
  size_t max_log_bytes_per_heartbeat = 1 << 20;
};

class WorkerAgent {
 public:
  WorkerAgent(const Clock* clock, control::Client* client, RankRunner* ranks,
              StepSource* steps, WorkerAgentOptions options, Logger logger);
  WorkerAgent(const WorkerAgent&) = delete;
  WorkerAgent& operator=(const WorkerAgent&) = delete;

  // One turn of the loop: polls the ranks, takes new telemetry and, when a
  // report is due, makes one (blocking) call to the coordinator and carries
  // out its orders. OK to go on; InvalidArgument when the coordinator
  // rejected the registration, Unavailable when it has not answered for
  // `coordinator_timeout_ms` (both name the coordinator): stop then.
  Status Step();

  // Milliseconds until the next report is due (0 if due now); the loop may
  // sleep up to this long, though ranks are polled only in Step().
  int64_t MsUntilNextReport() const;

  // Empty while unregistered.
  const std::string& worker_id() const { return worker_id_; }
  int64_t heartbeat_interval_ms() const { return interval_ms_; }

 private:
  control::Request BuildReport();
  void OnReply(const control::Reply& reply, int64_t now);
  Status OnFailure(const Status& status, int64_t now);

  const Clock* clock_;
  control::Client* client_;
  RankRunner* ranks_;
  StepSource* steps_;
  const WorkerAgentOptions options_;
  Logger logger_;

  std::string worker_id_;
  int64_t interval_ms_;
  int64_t next_report_ms_;  // steady time the next report is due
  int64_t last_ok_ms_;      // steady time of the last successful call
  int failures_ = 0;        // consecutive failed calls
  // Latest telemetry per (job, rank) not yet accepted by the coordinator.
  std::map<std::pair<std::string, int>, control::StepReport> unsent_steps_;
};

}  // namespace strata::worker
