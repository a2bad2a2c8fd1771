// Jobs from submit to end: records persisted in the StateStore
// before any reply, placement of pending attempts on idle workers
// (attempt_plan.h), launch and stop orders handed to workers in heartbeat
// replies, rank exit tracking, and detection-driven restart:
//
//   PENDING --enough idle workers--> RUNNING --all ranks exit 0--> SUCCEEDED
//      ^                                |
//      +--restart_count < max_restarts--+ a rank exits non-zero / by a
//                                       | signal / vanishes, or a node's
//                 otherwise FAILED <----+ worker is lost
//
// Orders are declarative: every heartbeat carries the ranks the worker
// holds; the reply launches the ranks of the worker's current assignment it
// does not hold yet and stops every attempt it holds that is no longer
// wanted. Lost replies, worker or coordinator restarts therefore converge
// without extra protocol. A worker is given a new attempt only once it holds
// nothing (old ranks stopped), so attempts never overlap on a node.
//
// Durability: every state change is written to the StateStore first and
// applied to memory only when the write succeeded. A cancel or submit whose
// write fails returns the store's error to the client; a transition driven
// by workers or time (placement, rank exit, worker loss, success) that cannot
// be written is not applied and is retried by the next heartbeat or tick
// once the store is writable again (Tick() does nothing while it is not).
//
// Limits (job_limits.h) are checked at submit, on jobs loaded by Recover()
// (violators are failed, never scheduled) and at placement, before anything
// is allocated per rank. Event-loop thread only; not thread-safe.
#pragma once

#include <deque>
#include <map>
#include <string>

#include "common/clock.h"
#include "common/logging.h"
#include "common/status.h"
#include "coordinator/fault/job_monitor.h"
#include "coordinator/jobs/event_log.h"
#include "coordinator/jobs/job_limits.h"
#include "coordinator/jobs/log_store.h"
#include "coordinator/kv/kv_store.h"
#include "coordinator/security/access_policy.h"
#include "coordinator/security/rank_keys.h"
#include "coordinator/registry/worker_registry.h"
#include "coordinator/state/state_store.h"
#include "fault/restart_backoff.h"
#include "observe/goodput.h"
#include "observe/metrics.h"
#include "proto/control.pb.h"

namespace strata::coordinator {

struct JobOptions {
  int64_t default_worker_wait_ms = 60000;  // JobLaunch.worker_wait_s = 0
  int64_t default_grace_ms = 5000;         // JobLaunch.stop_grace_ms = 0
  JobLimits limits;
  // With CURVE: issues each launched rank its own key (rank_keys.h) and
  // forgets a job's keys when it ends. Null: plaintext, no rank keys.
  RankKeys* rank_keys = nullptr;
};

class JobManager {
 public:
  // Every pointer must outlive the manager.
  JobManager(const Clock* clock, StateStore* store, EventLog* events,
             LogStore* logs, KvStore* kv, JobOptions options = {});

  // Reloads every job and its goodput ledger from the store. DataLoss if a
  // job record does not parse; a ledger that does not is dropped with a
  // warning (the job's goodput then counts from the restart as start-up).
  // Stored PENDING/RUNNING jobs that break the limits are failed (with the
  // reason) instead of being scheduled.
  Status Recover();
  // How often the goodput ledgers of active jobs are saved (SaveLedgers).
  static constexpr int64_t kGoodputSaveIntervalMs = 5000;

  // Writes every job record again from memory (after the store was
  // reopened: a write reported failed may have reached the disk anyway).
  Status Resync();

  // Validates the spec against the limits and, when `registry` is given and
  // launch.ranks_per_node is set, against the registered workers' capacity;
  // stores it as a PENDING job ("job-<n>"). The store's error (nothing
  // stored) when the write fails.
  // `owner` (the submitter's identity name, docs/security.md) is stored in
  // JobInfo.owner.
  StatusOr<std::string> Submit(const JobSpec& spec,
                               const WorkerRegistry* registry = nullptr,
                               const std::string& owner = "");
  // What the access policy needs to know about a job; nullopt if unknown.
  std::optional<JobFacts> Facts(const std::string& job_id) const;
  // Whether (job, attempt, rank) is a rank of the job's running attempt
  // placed on `worker_id`'s node: the only reports (steps, logs, flight
  // recorders, traces, rank states) a worker may make (docs/security.md
  // "Telemetry"). `attempt` < 0: the running attempt.
  bool PlacedOn(const std::string& worker_id, const std::string& job_id,
                int attempt, int rank);
  // Output may also arrive after its attempt ended, when placement has
  // moved on: accepted for ranks of the job's ended attempts (whose
  // placement is no longer kept) and else as PlacedOn.
  bool MayRelayLogs(const std::string& worker_id, const std::string& job_id,
                    int attempt, int rank);
  StatusOr<control::JobInfo> Get(const std::string& job_id) const;
  // Moves a PENDING/RUNNING job to CANCELLED (its ranks are stopped through
  // the next heartbeats); FailedPrecondition if it has already ended, the
  // store's error (job unchanged) if the change cannot be written.
  StatusOr<control::JobInfo> Cancel(const std::string& job_id);
  // Every job; with `with_steps`, each with its ranks' latest telemetry.
  control::JobsReply List(bool with_steps = false) const;

  // Fails attempts whose workers are lost; places pending attempts. While
  // the registry is Settling() (just after a coordinator restart or pause)
  // a worker it does not know yet is not lost and pending attempts do not
  // time out.
  void Tick(const WorkerRegistry& registry);

  // Applies a worker's rank report (heartbeat or re-registration) and fills
  // `orders` with its launch and stop orders.
  void OnWorkerReport(
      const std::string& worker_id,
      const google::protobuf::RepeatedPtrField<control::RankReport>& ranks,
      control::HeartbeatReply* orders);
  void OnLogs(const google::protobuf::RepeatedPtrField<control::LogChunk>& c);
  // Step reports of ranks placed on `worker_id` (PlacedOn) are kept when
  // their step moves forward and stays within the job's declared steps
  // (the first total_steps the job reported, which later reports cannot
  // change); the others are dropped and counted in the return value.
  int OnSteps(
      const std::string& worker_id,
      const google::protobuf::RepeatedPtrField<control::StepReport>& s);
  // Flight recorders a worker read for a hang diagnosis (job_faults.cc).
  void OnFlights(
      const google::protobuf::RepeatedPtrField<control::RankFlight>& f);
  // Applies `settings` ("key=value", fault/policy.h) to a PENDING or
  // RUNNING job's fault policy: InvalidArgument naming the key or the
  // field's range (nothing changed), NotFound, FailedPrecondition for an
  // ended job, the store's error. The attempt's detectors start over with
  // the new thresholds; actions apply from the next finding.
  StatusOr<control::JobInfo> SetFaultPolicy(
      const std::string& job_id,
      const google::protobuf::RepeatedPtrField<std::string>& settings);
  // Collective records a worker read for a trace (job_trace.cc).
  void OnTraces(
      const google::protobuf::RepeatedPtrField<control::RankTrace>& t);
  // What `strata trace` needs of a running job (docs/observe.md "Traces"):
  // the kept steps in [first_step, last_step], the ranks' collective
  // records as far as their workers sent them (the first request asks
  // them; `pending` names the ranks still missing), each rank's node and
  // its worker's clock estimate from `registry`, the attempt's events.
  // NotFound, InvalidArgument for a bad range, FailedPrecondition when the
  // job is not running.
  StatusOr<control::TraceReply> Trace(const control::TraceRequest& request,
                                      const WorkerRegistry& registry);
  // The running attempt's kept step reports of one rank, by step: the
  // lowest rank that reports a loss (pipeline: the last stage), else rank
  // 0. Empty for jobs not running. For the dashboard's curves.
  std::vector<control::StepReport> Curve(const std::string& job_id) const;
  // Rank 0's step times per job (seconds, observe::SecondsBuckets()).
  const std::map<std::string, observe::HistogramCounts>& StepHistograms()
      const {
    return step_hist_;
  }
  // The fault monitor's view of a running job (`strata diagnose`).
  StatusOr<control::DiagnoseReply> Diagnose(
      const control::DiagnoseRequest& request) const;

 private:
  static bool Active(const control::JobInfo& job);
  void AddSteps(control::JobInfo* info) const;  // latest per rank
  Status Persist(const control::JobInfo& info);
  // Writes `next` and, if that succeeded, makes it `job`.
  Status Commit(control::JobInfo& job, control::JobInfo next);
  void TryPlace(control::JobInfo& job, const WorkerRegistry& registry);
  // Each writes the new state first; on error `job` is unchanged.
  Status FailAttempt(control::JobInfo& job, const std::string& reason);
  Status Finish(control::JobInfo& job, control::JobState state,
                const std::string& message);
  // Records the end event and drops the job's KV keys (after Finish).
  void Ended(const control::JobInfo& job);
  bool Writable() const { return store_->health().writable; }
  int64_t WaitMs(const control::JobInfo& job) const;

  // Per-attempt lookups derived from the job record, rebuilt when the
  // attempt changes, so a heartbeat costs O(ranks on that node) even for
  // 16,384-rank jobs.
  struct AttemptIndex {
    int attempt = -1;
    std::string plan_json;
    std::map<std::string, int> node_of_worker;
    std::vector<std::vector<int>> ranks_of_node;
  };
  const AttemptIndex& Index(const control::JobInfo& job);

  // Fault monitoring of running attempts (job_faults.cc, docs/fault.md).
  struct Watched {
    int attempt = -1;
    std::unique_ptr<JobMonitor> monitor;
    // A hang being diagnosed: the stall, since when (steady ms), and the
    // flight recorders received so far, by rank.
    std::optional<fault::Stall> stall;
    int64_t diagnose_since_ms = 0;
    std::map<int, control::RankFlight> flights;
    // For traces: recent step reports per rank (links dropped); the
    // newest collection of flight recorders, numbered from 1 within the
    // attempt, under way since trace_since_ms (steady; -1: none) and the
    // records received, by rank.
    std::map<int, std::deque<control::StepReport>> trace_steps;
    int64_t trace_collection = 0;
    int64_t trace_since_ms = -1;
    std::map<int, control::RankTrace> traces;
    // A collection began less than the collection window ago.
    bool Collecting(int64_t now) const;
  };
  Watched& WatchedOf(const control::JobInfo& job);
  void Watch(control::JobInfo& job, const control::StepReport& s);
  void WatchTick(control::JobInfo& job);
  void ConcludeHang(control::JobInfo& job, Watched& w);
  // Stores finding `e` as an event and acts on it by `action`: `evict`
  // takes `evict_node` (refused when empty); `rebalance` re-plans with that
  // node at its measured speed.
  void ActOn(control::JobInfo& job, const fault::FaultEvent& e,
             FaultPolicy::Action action, const std::string& summary,
             const std::string& evict_node);
  void AddDiagnoseOrders(const std::string& worker_id,
                         control::HeartbeatReply* orders);
  void KeepForTrace(const control::JobInfo& job, Watched& w,
                    const control::StepReport& s);
  void AddTraceOrders(const std::string& worker_id,
                      control::HeartbeatReply* orders);
  std::map<std::string, Watched> watched_;
  // Restart cost per job: since when (steady ms) its attempt has been
  // restarting, and the last measured cost (ms) from a failure to the
  // first step of the next attempt.
  std::map<std::string, int64_t> restart_began_ms_, restart_cost_ms_;
  // Restart backoff (fault/restart_backoff.h); keys: active jobs that failed
  // an attempt. A PENDING job is not placed before its backoff is Ready().
  std::map<std::string, fault::RestartBackoff> backoff_;
  // Self-calibration (docs/planner.md "Calibration"): the stored compute
  // scale of a device key (attempt_plan.h CalibrationKey; 1 when none), the
  // scale each job's current plan used, and the update from a job's plan
  // checks (measured / predicted stage compute x the scale it planned with).
  double StoredComputeScale(const std::string& key);
  void Calibrate(const control::JobInfo& job, double measured_over_predicted);
  std::map<std::string, double> planned_scale_;  // job id -> scale
  // Whether acting on `e` is worth a restart (predicted loss over the
  // remaining steps against the restart cost); the reason either way.
  std::pair<bool, std::string> WorthRestart(const control::JobInfo& job,
                                            const fault::FaultEvent& e);
  // For `rebalance`: the job's node speeds with `node` slowed by
  // e.slowdown and the figures behind it, when the planner predicts that
  // re-planning with them gains at least 5% over running on as is;
  // FailedPrecondition with the reason otherwise.
  StatusOr<std::pair<google::protobuf::Map<std::string, double>, std::string>>
  Rebalanced(const control::JobInfo& job, const fault::FaultEvent& e,
             const std::string& node) const;

  const Clock* clock_;
  StateStore* store_;
  EventLog* events_;
  LogStore* logs_;
  KvStore* kv_;
  JobOptions options_;
  Logger logger_;
  int64_t next_id_ = 1;
  bool losing_output_ = false;  // the last LogStore::Append failed
  std::map<std::string, control::JobInfo> jobs_;
  // job id -> (attempt, steady ms) when placement first looked at that
  // pending attempt: how long it has waited for workers (memory only).
  std::map<std::string, std::pair<int, int64_t>> pending_since_steady_ms_;
  // Latest telemetry per job and rank (memory only).
  std::map<std::string, std::map<int, control::StepReport>> steps_;
  std::map<std::string, AttemptIndex> index_;
  // job id -> its declared last step: the first non-zero total_steps any of
  // its ranks reported (memory only; keys are active jobs).
  std::map<std::string, int64_t> declared_steps_;
  void IssueRankKeys(const control::JobInfo& job);
  // Goodput accounting per job, and the job with it filled. The ledgers
  // are written to the store (goodput/<job>) at most every
  // kGoodputSaveIntervalMs while their job is active and once at its end
  // (SaveLedgers), and restored by Recover: a coordinator restart keeps the
  // accounting up to the last save, and the time after it goes where the
  // saved phase was heading.
  std::map<std::string, observe::GoodputLedger> goodput_;
  int64_t goodput_saved_ms_ = 0;
  // Writes the ledgers of active jobs (all of them when `jobs` is empty
  // and the interval has passed) or of `jobs` now.
  void SaveLedgers(const std::vector<std::string>& jobs = {});
  std::map<std::string, observe::HistogramCounts> step_hist_;
  observe::GoodputLedger& LedgerOf(const control::JobInfo& job);
  void AddGoodput(control::JobInfo* info) const;
};

}  // namespace strata::coordinator
