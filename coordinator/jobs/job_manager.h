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
// is allocated per rank.
//
// Parts (docs/architecture.md "Coordinator"): this class is the job
// lifecycle above (submit, cancel, placement, rank reports, attempt end)
// and owns, one per concern, the JobTable (every job's JobRuntime and the
// bounded history of ended jobs, job_table.h), the FaultHandler
// (job_faults.h, decisions in coordinator/fault/decide.h), the
// TraceCollector (job_trace.h), the GoodputBook (job_goodput.h) and the
// Calibrator (job_calibration.h). The parts keep no per-job state of their
// own: a job's state is its JobRuntime, dropped in one place
// (JobTable::Retire) when the job ends. Event-loop thread only; not
// thread-safe.
#pragma once

#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "common/clock.h"
#include "common/logging.h"
#include "common/status.h"
#include "coordinator/jobs/event_log.h"
#include "coordinator/jobs/job_calibration.h"
#include "coordinator/jobs/job_faults.h"
#include "coordinator/jobs/job_goodput.h"
#include "coordinator/jobs/job_limits.h"
#include "coordinator/jobs/job_table.h"
#include "coordinator/jobs/job_trace.h"
#include "coordinator/jobs/log_store.h"
#include "coordinator/jobs/placement_task.h"
#include "coordinator/kv/kv_store.h"
#include "coordinator/registry/worker_registry.h"
#include "coordinator/security/access_policy.h"
#include "coordinator/security/rank_keys.h"
#include "coordinator/state/state_store.h"
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
  // How many ended jobs stay in memory, and for how long (job_table.h).
  JobRetention retention;
  // Attempts on at least this many nodes are placed off the event loop
  // (placement_task.h); smaller ones within the tick that decides them,
  // a tick sooner. The cost grows with the job's nodes and ranks: 55-90 ms
  // of CPU for 16,384 ranks on 4,096 nodes under load (docs/results.md
  // "Coordinator at scale"), so a few ms at 256 nodes.
  int async_placement_nodes = 256;
};

class JobManager : private JobActions {
 public:
  // Every pointer must outlive the manager.
  JobManager(const Clock* clock, StateStore* store, EventLog* events,
             LogStore* logs, KvStore* kv, JobOptions options = {});

  // Reloads every active job, the ended jobs the retention keeps, and their
  // goodput ledgers from the store. DataLoss if a job record does not
  // parse; a ledger that does not is dropped with a warning (the job's
  // goodput then counts from the restart as start-up). Stored
  // PENDING/RUNNING jobs that break the limits are failed (with the reason)
  // instead of being scheduled.
  Status Recover();
  // How often the goodput ledgers of active jobs are saved.
  static constexpr int64_t kGoodputSaveIntervalMs = GoodputBook::kSaveIntervalMs;

  // Writes every job record held in memory again (after the store was
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
  // Any job, also one that aged out of memory (read from the store).
  StatusOr<control::JobInfo> Get(const std::string& job_id) const;
  // Moves a PENDING/RUNNING job to CANCELLED (its ranks are stopped through
  // the next heartbeats); FailedPrecondition if it has already ended, the
  // store's error (job unchanged) if the change cannot be written.
  StatusOr<control::JobInfo> Cancel(const std::string& job_id);
  // Every job held in memory (active, and ended ones the retention keeps);
  // with `with_steps`, each with its ranks' latest telemetry. A page of
  // them with `page_bytes` > 0 (JobTable::List).
  control::JobsReply List(bool with_steps = false,
                          const std::string& after = "",
                          int64_t page_bytes = 0) const;
  // Every job held in memory with its ranks' latest telemetry, each as
  // JobSummary (job_summary.h) shows it: what /metrics reads, at a cost
  // that does not grow with the jobs' node and rank counts.
  control::JobsReply Summaries() const;

  // Returns once the placements computed off the loop (placement_task.h)
  // are done; the next Tick applies them. For tests.
  void WaitForPlacements() {
    if (placer_ != nullptr) placer_->Drain();
  }

  // Fails attempts whose workers are lost; places pending attempts; drops
  // ended jobs past the retention. While the registry is Settling() (just
  // after a coordinator restart or pause) a worker it does not know yet is
  // not lost and pending attempts do not time out.
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
  // Flight recorders a worker read for a hang diagnosis (job_faults.h).
  void OnFlights(
      const google::protobuf::RepeatedPtrField<control::RankFlight>& f);
  // The memory tier's refusals a worker reported (HeartbeatRequest
  // .mem_notices): each a "mem_tier" event of its job, when the worker is
  // placed in the job's running attempt (others are dropped).
  void OnMemNotices(
      const std::string& worker_id,
      const google::protobuf::RepeatedPtrField<control::MemTierNotice>& n);
  // Applies `settings` ("key=value", fault/policy.h) to a PENDING or
  // RUNNING job's fault policy: InvalidArgument naming the key or the
  // field's range (nothing changed), NotFound, FailedPrecondition for an
  // ended job, the store's error. The attempt's detectors start over with
  // the new thresholds; actions apply from the next finding.
  StatusOr<control::JobInfo> SetFaultPolicy(
      const std::string& job_id,
      const google::protobuf::RepeatedPtrField<std::string>& settings);
  // Collective records a worker read for a trace (job_trace.h).
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
  // Rank 0's step times of every job held in memory (seconds,
  // observe::SecondsBuckets()).
  std::map<std::string, observe::HistogramCounts> StepHistograms() const {
    return table_.StepHistograms();
  }
  // The fault monitor's view of a running job (`strata diagnose`).
  StatusOr<control::DiagnoseReply> Diagnose(
      const control::DiagnoseRequest& request) const;

 private:
  // JobActions.
  Status Commit(JobRuntime& rt, control::JobInfo next) override;
  Status FailAttempt(JobRuntime& rt, const std::string& reason) override;
  bool RestartInPlace(JobRuntime& rt, int rank,
                      const std::string& cause) override;
  // In-place restart (job_inplace.cc). The attempt's in-place state
  // (reset when the attempt changed); whether an in-place restart of
  // `what` may start (every rank opted in, none under way, restarts left;
  // a refusal is a fault_action event); announces the next generation with
  // `keys` (relative to the generation's namespace) written first and
  // makes `p` the replacement under way (false: the KV refused).
  InPlaceState& InPlaceOf(JobRuntime& rt);
  bool InPlaceAllowed(JobRuntime& rt, const std::string& what);
  bool AnnounceGeneration(
      JobRuntime& rt, InPlaceState::Replacement p,
      const std::vector<std::pair<std::string, std::string>>& keys);
  // Whether `rank` is being replaced in place (its orders are replace
  // orders, not launch orders).
  bool InPlaceLaunching(JobRuntime& rt, int rank);
  // Lost nodes (indexes) of a running attempt replaced in place on spares
  // (job_inplace_node.cc); false when the attempt must restart instead.
  bool ReplaceNodesInPlace(JobRuntime& rt, const WorkerRegistry& registry,
                           const std::vector<int>& lost);
  // A step report of the running
  // attempt: notes the ranks that opted in and ends a replacement at its
  // first step; false for a report of an older generation (dropped).
  bool OnInPlaceStep(JobRuntime& rt, const control::StepReport& s);
  // The replace order for the rank under replacement on `worker_id`.
  void AddReplaceOrders(const std::string& worker_id, JobRuntime& rt,
                        control::HeartbeatReply* orders);
  // Tick: restarts the attempt when a replacement never reported a step.
  void CheckInPlace(JobRuntime& rt);

  Status Persist(const control::JobInfo& info);
  // Each writes the new state first; on error the job is unchanged.
  Status Finish(JobRuntime& rt, control::JobState state,
                const std::string& message);
  // Records the end event, drops the job's KV keys and marks it for
  // JobTable::Retire (after Finish or a last FailAttempt).
  void Ended(JobRuntime& rt);
  // Moves the jobs that ended during this call out of the active table;
  // returns free heap to the system after every kTrimEveryJobs jobs that
  // left memory (server/heap_policy.h).
  void Retire();
  static constexpr int kTrimEveryJobs = 64;
  int left_since_trim_ = 0;
  bool Writable() const { return store_->health().writable; }
  int64_t WaitMs(const control::JobInfo& job) const;
  Status CheckSubmit(const JobSpec& spec, const WorkerRegistry* registry) const;
  Status RecoverJobs(std::set<std::string>* stored);
  void FailOverLimits();
  void IssueRankKeys(const control::JobInfo& job);

  // Scheduling (job_placement.cc).
  void CheckWorkers(JobRuntime& rt, const WorkerRegistry& registry);
  void TryPlace(JobRuntime& rt, const WorkerRegistry& registry);
  // Fails a pending attempt that waited for workers longer than its
  // worker_wait_s (not while the registry settles).
  void WaitForWorkers(JobRuntime& rt, const WorkerRegistry& registry,
                      const std::string& shortage);
  // Places the attempt on `nodes` (in node order) with `plan` (unset: the
  // planner's), the job's spares re-reserved from `idle` (ReserveSpares):
  // takes the snapshot and computes the placement in this step when the
  // attempt has fewer than JobOptions::async_placement_nodes nodes, else
  // hands it to the PlacementWorker (placement_task.h; applied by a later
  // TryPlace).
  void Place(JobRuntime& rt, std::vector<control::WorkerInfo> nodes,
             const control::ListWorkersReply& workers,
             const std::vector<control::WorkerInfo>& idle,
             const std::set<std::string>& taken, std::optional<Plan> plan,
             int port, std::vector<std::pair<std::string, std::string>> swaps);
  // A finished off-loop placement: re-checks its nodes and spares against
  // the registry now (dropped, and placed again next tick, if one is gone,
  // busy or taken) and launches it.
  void ApplyPlacement(JobRuntime& rt, const WorkerRegistry& registry);
  // Stores the placed record (one write of the bytes serialised with it),
  // moves it and its AttemptIndex in, and records the spare_used, launched,
  // spares/spares_short and replanned events; fails the job when planning
  // failed.
  void Launch(JobRuntime& rt, const PlacementSnapshot& in,
              PlacedAttempt placed);
  // The worker ids other active jobs run on or hold as spares.
  std::set<std::string> TakenByOthers(const std::string& job_id);
  // A running job's spare reservation kept at launch.spares: dead or
  // evicted spares dropped, idle workers added (event "spares" on change).
  void KeepSpares(JobRuntime& rt, const WorkerRegistry& registry);

  // Rank reports (job_reports.cc).
  struct ReportOutcome;
  // One rank's state as its worker reports it: stops what is not wanted,
  // records exits, fails the attempt on a failed rank.
  void ApplyRankReport(const std::string& worker_id,
                       const control::RankReport& r, ReportOutcome* out);
  // Launch orders for the ranks of `rt` placed on `worker_id` it does not
  // hold yet; fails the attempt when a rank it held vanished; ends the job
  // when every rank exited 0.
  void AddLaunchOrders(const std::string& worker_id, JobRuntime& rt,
                       ReportOutcome& seen, control::HeartbeatReply* orders);
  bool KeepStep(JobRuntime& rt, const control::StepReport& report);

  const Clock* clock_;
  StateStore* store_;
  EventLog* events_;
  LogStore* logs_;
  KvStore* kv_;
  JobOptions options_;
  Logger logger_;
  int64_t next_id_ = 1;
  bool losing_output_ = false;  // the last LogStore::Append failed
  JobTable table_;
  Calibrator calibrator_;
  GoodputBook goodput_;
  TraceCollector traces_;
  FaultHandler faults_;
  // Made at the first off-loop placement; destroyed first (joins).
  std::unique_ptr<PlacementWorker> placer_;
};

}  // namespace strata::coordinator
