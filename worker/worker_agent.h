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
//   `busy_report_ms` while ranks run, so output and telemetry flow, and
//   while the coordinator says this worker is a job's hot spare, so an
//   in-place node replacement reaches it fast);
// - each call waits up to min(2 x interval, `max_call_timeout_ms`);
// - a failed call is retried after a backoff that starts at
//   `retry_initial_ms` and doubles per consecutive failure, capped at the
//   heartbeat interval (retrying less often would let a restarted
//   coordinator declare the worker lost before it re-registers), each delay
//   shortened by a random fraction up to `retry_jitter` so a fleet of
//   workers does not retry in lockstep.
//
// Coordinator outages (killed, restarted, paused, unreachable): the ranks
// keep running and the worker keeps retrying. When the coordinator answers
// again — the same process after a pause, or a restarted one that loaded its
// state — the worker re-registers if it is unknown, listing the ranks it
// holds (running or exited, with PIDs and exit codes), and sends the latest
// step of each rank again, so the coordinator adopts them as the running
// attempt instead of restarting the job. Only after `coordinator_grace_ms`
// without a successful call does the worker stop its ranks (an error names
// the coordinator, the silence and the attempts stopped); it keeps retrying
// afterwards, as an idle worker. While calls fail, reports carry no output:
// a request queued in a paused coordinator is handled when it resumes, and
// re-sending the same output in every retry would store it many times.
// Output is committed (RankRunner::CommitLogs) and telemetry forgotten only
// once a report carrying them was answered. Orders are declarative (the
// coordinator re-sends what the worker lacks), so a lost reply needs no
// recovery here. Warnings about an unreachable coordinator are rate-limited
// (common/log_limiter.h).
//
// Thread model: single-threaded; the owner's loop calls Step() on one
// thread. Not thread-safe. Borrows every dependency; they must outlive it.
#pragma once

#include <functional>

#include <cstddef>
#include <cstdint>
#include <deque>
#include <map>
#include <random>
#include <string>
#include <utility>

#include "common/clock.h"
#include "common/log_limiter.h"
#include "common/logging.h"
#include "common/status.h"
#include "control/client.h"
#include "proto/control.pb.h"
#include "worker/clock_sync.h"
#include "worker/rank_runner.h"
#include "worker/stack_dump.h"
#include "worker/step_source.h"

namespace strata::worker {

struct WorkerAgentOptions {
  std::string coordinator;  // endpoint, named in messages
  std::string node_name;    // identity the worker registers under
  std::string address;      // host its ranks are reached at
  control::NodeProbe probe;
  // The memory tier's replica server, HOST:PORT (empty: none); sent with
  // every registration.
  std::string replica_endpoint;
  // The memory tier's refusals to report (ReplicaServer::TakeNotices);
  // taken into each heartbeat (lost with a heartbeat that fails: they are
  // logged on the worker too).
  std::function<std::vector<control::MemTierNotice>()> mem_notices;
  // Stop the ranks after this long without a successful call (the worker
  // itself keeps retrying).
  int64_t coordinator_grace_ms = 600000;
  // Heartbeat interval until the coordinator sets one.
  int64_t initial_interval_ms = 1000;
  // Report period while ranks run (capped by the interval).
  int64_t busy_report_ms = 200;
  // First retry delay after a failed call; doubles up to the interval.
  int64_t retry_initial_ms = 100;
  // Each retry delay is cut by a random fraction in [0, retry_jitter).
  double retry_jitter = 0.5;
  uint64_t jitter_seed = std::random_device{}();
  // Sent with every registration (RegisterWorkerRequest.incarnation): the
  // coordinator refuses a registration for a node whose live worker has
  // another one. Random per process.
  std::string incarnation = std::to_string(std::random_device{}()) + "-" +
                            std::to_string(std::random_device{}());
  // SIGTERM-to-SIGKILL time when the grace expires, until the coordinator
  // has set one in a heartbeat reply.
  int64_t stop_grace_ms = 5000;
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
  // out its orders. OK to go on (also while the coordinator is away);
  // InvalidArgument, naming the coordinator, when it rejected the
  // registration: stop then.
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
  void OnRegistered(const control::RegisterWorkerReply& r, int64_t now);
  // A hang diagnosis order: this node's ranks' flight recorders and stacks.
  void DumpForDiagnosis(const control::HeartbeatReply& hb, int64_t now);
  // A trace order: every operation this node's ranks' recorders hold.
  void ReadTraces(const control::HeartbeatReply& hb);
  Status OnFailure(const Status& status, int64_t now);
  // Stops every attempt held once the grace has expired.
  void StopRanksAfterGrace(int64_t silent_ms);

  const Clock* clock_;
  control::Client* client_;
  RankRunner* ranks_;
  StepSource* steps_;
  const WorkerAgentOptions options_;
  Logger logger_;

  std::string worker_id_;
  int64_t interval_ms_;
  int64_t next_report_ms_;          // steady time the next report is due
  int64_t last_ok_ms_;              // steady time of the last successful call
  int failures_ = 0;                // consecutive failed calls
  bool report_has_logs_ = false;    // the call in progress carries output
  bool stopped_for_grace_ = false;  // since the last successful call
  int64_t stop_grace_ms_;           // the coordinator's, once it set one
  std::mt19937_64 jitter_;
  LogLimiter limiter_;  // warnings about the coordinator
  // Latest telemetry per (job, rank) of the ranks held, re-sent after a
  // re-registration; and the part not yet accepted by the coordinator.
  std::map<std::pair<std::string, int>, control::StepReport> latest_steps_;
  std::map<std::pair<std::string, int>, std::deque<control::StepReport>>
      unsent_steps_;  // every step since the last accepted heartbeat
  // Answers to `diagnose`: ready to send, and waiting for their stacks
  // (by dump id); attempts answered recently (steady ms).
  static constexpr int64_t kRediagnoseMs = 10000;
  void AddStack(int id, const std::string& text);
  std::vector<control::RankFlight> flights_;
  std::map<int, control::RankFlight> dumping_;
  int next_dump_id_ = 0;
  StackDumps stacks_;
  std::map<std::string, int64_t> diagnosed_;
  // Answers to `trace`, ready to send; the collection last answered per
  // attempt held: the coordinator repeats an order until the answer
  // arrives, each new request is a new collection.
  // Records per heartbeat (~45 bytes each: ~1 MiB of a 4 MiB frame).
  static constexpr int kMaxTraceOps = 24000;
  std::vector<control::RankTrace> traces_;
  std::map<std::string, int64_t> traced_;
  ClockSync clock_sync_;
  int64_t call_sent_us_ = 0;  // wall us when the call in progress was sent
  int64_t last_rtt_us_ = 0;   // of the last answered heartbeat
};

}  // namespace strata::worker
