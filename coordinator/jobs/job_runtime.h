// Everything the coordinator keeps in memory about one job, in one place
// (docs/architecture.md "Coordinator"): the stored record and what each
// concern of the job manager derives from it. A JobRuntime exists exactly
// while its job is PENDING or RUNNING; when the job ends, JobTable::Retire
// keeps an EndedJob (what `strata status`, the dashboard and /metrics show
// of a finished job) and erases the runtime with every per-attempt structure
// in it. Plain data; event-loop thread only.
#pragma once

#include <algorithm>
#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "common/status.h"
#include "coordinator/fault/job_monitor.h"
#include "coordinator/jobs/launch_orders.h"
#include "fault/hang_detector.h"
#include "fault/restart_backoff.h"
#include "observe/goodput.h"
#include "observe/metrics.h"
#include "proto/control.pb.h"

namespace strata::coordinator {

// Per-attempt lookups derived from the job record, rebuilt when the attempt
// changes, so a heartbeat costs O(ranks on that node) even for 16,384-rank
// jobs (JobManager::Index).
struct AttemptIndex {
  int attempt = -1;
  bool built = false;
  // What every launch order of the attempt shares (launch_orders.h), or why
  // the plan cannot place them.
  StatusOr<AttemptLaunches> launches = absl::FailedPreconditionError("none");
  std::map<std::string, int> node_of_worker;  // worker id -> node index
  std::vector<std::vector<int>> ranks_of_node;
};

// Fault monitoring of the running attempt (job_faults.cc, docs/fault.md).
struct FaultWatch {
  int attempt = -1;
  std::unique_ptr<JobMonitor> monitor;  // null until the attempt's first use
  // A hang being diagnosed: the stall, since when (steady ms), and the
  // flight recorders received so far, by rank.
  std::optional<fault::Stall> stall;
  int64_t diagnose_since_ms = 0;
  std::map<int, control::RankFlight> flights;
};

// What `strata trace` and the dashboard's curves need of the running
// attempt (job_trace.cc, docs/observe.md "Traces").
struct TraceBuffer {
  int attempt = -1;
  // Recent step reports per rank (links dropped), capped by job_trace.cc.
  std::map<int, std::deque<control::StepReport>> steps;
  // The newest collection of flight recorders, numbered from 1 within the
  // attempt, under way since since_ms (steady; -1: none), and the records
  // received, by rank.
  int64_t collection = 0;
  int64_t since_ms = -1;
  std::map<int, control::RankTrace> traces;
};

// Restart cost (job_faults.cc): since when (steady ms) the job has been
// restarting, and the last measured cost (ms) from a failure to the first
// step of the next attempt.
struct RestartTiming {
  std::optional<int64_t> began_ms;
  std::optional<int64_t> cost_ms;
};

// In-place restart of one rank of the running attempt (job_inplace.cc,
// docs/fault.md "In-place restart").
struct InPlaceState {
  int attempt = -1;          // the attempt the rest describes
  std::set<int> opted_in;    // ranks whose step reports say in_place
  int generation = 0;        // announced in the KV as inplace/generation
  int restarts = 0;          // in-place restarts of this attempt
  // The replacement under way: from the failure seen until the first step
  // of the new generation from one of the replaced ranks. One rank, or
  // every rank of a lost node started on a spare (`lost_node` names the
  // node it replaces; empty for one rank).
  struct Replacement {
    std::vector<int> ranks;
    std::string node, cause, lost_node;  // node: where they start
    int64_t since_ms = 0;  // steady ms the coordinator saw the failure
    int64_t last_step = 0;  // the newest step any rank had reported
    bool Has(int rank) const {
      return std::find(ranks.begin(), ranks.end(), rank) != ranks.end();
    }
  };
  std::optional<Replacement> pending;
};

struct PlacementTask;  // placement_task.h

struct JobRuntime {
  // The record as stored ("job/<id>"): changed only through
  // JobManager::Commit (stored first, then applied).
  control::JobInfo info;
  // Scheduling: (attempt, steady ms) when placement first looked at the
  // pending attempt: how long it has waited for workers.
  std::optional<std::pair<int, int64_t>> pending_since;
  AttemptIndex index;
  // Rank reports: latest telemetry per rank of the current attempt, and the
  // job's declared last step (the first non-zero total_steps any rank
  // reported; later reports cannot change it).
  std::map<int, control::StepReport> latest_steps;
  int64_t declared_steps = 0;
  FaultWatch fault;
  InPlaceState in_place;
  RestartTiming restart;
  // Restart backoff (fault/restart_backoff.h), once an attempt failed: a
  // PENDING job is not placed before it is Ready().
  std::optional<fault::RestartBackoff> backoff;
  TraceBuffer trace;
  // Goodput/metrics: the ledger (saved to "goodput/<id>") and rank 0's step
  // times (observe::SecondsBuckets()).
  observe::GoodputLedger goodput;
  observe::HistogramCounts step_hist;
  // Calibration: the compute scale the current plan was made with.
  double planned_scale = 1.0;
  // The pending attempt's placement being computed off the loop
  // (placement_task.h); null when none is.
  std::shared_ptr<PlacementTask> placing;

  explicit JobRuntime(control::JobInfo record)
      : info(std::move(record)), goodput(info.submit_unix_ms()) {}
};

// How a rank's report reads: exited 0, failed (a non-zero exit, a signal,
// or it could not start), and the exit in words.
inline bool ExitedZero(const control::RankReport& r) {
  return r.state() == control::RANK_EXITED && r.exit_code() == 0 &&
         r.signal() == 0;
}
inline bool Failed(const control::RankReport& r) {
  return r.state() == control::RANK_FAILED_TO_START ||
         (r.state() == control::RANK_EXITED &&
          (r.exit_code() != 0 || r.signal() != 0));
}
std::string DescribeExit(const control::RankReport& r);

// The AttemptIndex of `job`'s current attempt (any thread).
AttemptIndex BuildAttemptIndex(const control::JobInfo& job);
// The running attempt's AttemptIndex, rebuilt when the attempt changed.
const AttemptIndex& IndexOf(JobRuntime& rt);
// The ranks of the running attempt placed on `worker_id`'s node; null when
// none is.
const std::vector<int>* RanksOn(JobRuntime& rt, const std::string& worker_id);

// What is kept of a job after it ended, until the retention policy
// (job_table.h) drops it from memory; its record, ledger and events stay in
// the state store.
struct EndedJob {
  control::JobInfo info;
  std::map<int, control::StepReport> latest_steps;
  // None for a job recovered without a stored ledger: its goodput is then
  // counted as start-up from submit to end.
  std::optional<observe::GoodputLedger> goodput;
  observe::HistogramCounts step_hist;
};

}  // namespace strata::coordinator
