#include "coordinator/jobs/job_manager.h"
#include "coordinator/server/heap_policy.h"

#include <algorithm>
#include <set>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "control/codec.h"
#include "coordinator/jobs/attempt_plan.h"
#include "planner/job.h"

namespace strata::coordinator {

using control::AttemptKey;

namespace {

void SetEnd(control::JobInfo& job, control::JobState state,
            const std::string& message, int64_t now_ms) {
  job.set_state(state);
  job.set_end_unix_ms(now_ms);
  job.set_message(message);
}

}  // namespace

JobManager::JobManager(const Clock* clock, StateStore* store, EventLog* events,
                       LogStore* logs, KvStore* kv, JobOptions options)
    : clock_(clock),
      store_(store),
      events_(events),
      logs_(logs),
      kv_(kv),
      options_(options),
      logger_(GetLogger("CTRL")),
      table_(store, options.retention),
      calibrator_(store, events),
      goodput_(clock, store, logger_),
      traces_(clock, events),
      faults_(clock, events, &calibrator_, this) {}

Status JobManager::Recover() {
  std::set<std::string> stored;
  RETURN_IF_ERROR(RecoverJobs(&stored));
  FailOverLimits();
  // Ranks that outlived a coordinator restart reconnect with the keys they
  // were issued: derive them again (rank_keys.h).
  for (const auto& [id, rt] : table_.active()) {
    if (rt.info.state() == control::RUNNING) IssueRankKeys(rt.info);
  }
  Retire();
  RETURN_IF_ERROR(goodput_.Restore(table_, stored));
  auto next = store_->Get("meta/next_job_id");
  if (next.ok()) {
    if (!absl::SimpleAtoi(*next, &next_id_)) {
      return absl::DataLossError("meta/next_job_id is not an integer");
    }
  } else if (!absl::IsNotFound(next.status())) {
    return next.status();
  }
  return absl::OkStatus();
}

// Active jobs become runtimes; of the ended ones only those the retention
// keeps, the most recently ended, are held (the others stay in the store).
Status JobManager::RecoverJobs(std::set<std::string>* stored) {
  ASSIGN_OR_RETURN(auto rows, store_->Scan("job/"));
  std::vector<control::JobInfo> ended;
  for (const auto& [key, value] : rows) {
    control::JobInfo info;
    if (!info.ParseFromString(value)) {
      return absl::DataLossError(
          absl::StrCat("state record ", key, " does not parse as JobInfo"));
    }
    stored->insert(info.job_id());
    if (JobTable::IsActive(info.state())) {
      table_.AddActive(std::move(info));
    } else {
      ended.push_back(std::move(info));
    }
  }
  std::stable_sort(ended.begin(), ended.end(), [](const auto& a, const auto& b) {
    return a.end_unix_ms() < b.end_unix_ms();
  });
  const size_t keep = static_cast<size_t>(
      std::max<int64_t>(0, options_.retention.max_ended_jobs));
  const size_t from = ended.size() > keep ? ended.size() - keep : 0;
  for (size_t i = from; i < ended.size(); ++i) {
    EndedJob job;
    job.info = std::move(ended[i]);
    table_.AddEnded(std::move(job));
  }
  return absl::OkStatus();
}

// Jobs stored before the limits (or under looser ones) are failed here,
// before anything is allocated for them: one of them must not take the
// coordinator down at every start.
void JobManager::FailOverLimits() {
  for (auto& [id, rt] : table_.active()) {
    Status limits = CheckJobLimits(rt.info.spec(), options_.limits);
    if (limits.ok()) continue;
    const std::string reason =
        absl::StrCat("refused at coordinator start: ", limits.message(),
                     " (stored before this limit applied)");
    logger_->error("{}: {}", id, reason);
    Status s = Finish(rt, control::FAILED, reason);
    if (!s.ok()) {
      // Not scheduled either way; the next start fails it again.
      SetEnd(rt.info, control::FAILED, reason, clock_->NowMs());
      table_.MarkEnded(id);
      logger_->error("{}: {}", id, s.ToString());
    }
  }
}

Status JobManager::Resync() {
  std::vector<StateStore::Mutation> rows;
  rows.emplace_back("meta/next_job_id", absl::StrCat(next_id_));
  for (const auto& [id, rt] : table_.active()) {
    rows.emplace_back(absl::StrCat("job/", id), rt.info.SerializeAsString());
  }
  for (const auto& [id, job] : table_.ended()) {
    rows.emplace_back(absl::StrCat("job/", id), job.info.SerializeAsString());
  }
  return store_->Write(rows);
}

void JobManager::Retire() {
  left_since_trim_ += table_.Retire(clock_->NowMs());
  if (left_since_trim_ >= kTrimEveryJobs) {
    left_since_trim_ = 0;
    ReleaseFreeHeap();
  }
}

Status JobManager::Persist(const control::JobInfo& info) {
  return store_->Put(absl::StrCat("job/", info.job_id()),
                     info.SerializeAsString());
}

Status JobManager::Commit(JobRuntime& rt, control::JobInfo next) {
  RETURN_IF_ERROR(Persist(next));
  rt.info = std::move(next);
  return absl::OkStatus();
}

int64_t JobManager::WaitMs(const control::JobInfo& job) const {
  int s = job.spec().launch().worker_wait_s();
  return s > 0 ? s * 1000LL : options_.default_worker_wait_ms;
}

Status JobManager::CheckSubmit(const JobSpec& spec,
                               const WorkerRegistry* registry) const {
  const JobLaunch& l = spec.launch();
  if (l.command().empty() || l.command(0).empty()) {
    return absl::InvalidArgumentError("job spec: launch.command is empty");
  }
  RETURN_IF_ERROR(CheckJobLimits(spec, options_.limits));
  // The same ranges the CLI checks when it reads a job file: a client that
  // speaks the protocol directly gets no further.
  RETURN_IF_ERROR(planner::ValidateJob(spec, "job spec"));
  if (l.nodes() > 0 && l.min_nodes() > l.nodes()) {
    return absl::InvalidArgumentError(
        absl::StrCat("job spec: launch.min_nodes (", l.min_nodes(),
                     ") exceeds launch.nodes (", l.nodes(), ")"));
  }
  RETURN_IF_ERROR(
      CheckLaunchOrderSize(spec, std::max(1, l.ranks_per_node()), 0));
  if (registry != nullptr && l.ranks_per_node() > 0) {
    // Placeable on at least one registered worker? (None registered yet:
    // checked again at placement.)
    Status fits = absl::OkStatus();
    const control::ListWorkersReply workers = registry->List();
    for (const auto& w : workers.workers()) {
      fits = CheckNodeCapacity(l.ranks_per_node(), w, options_.limits);
      if (fits.ok()) break;
    }
    if (!fits.ok()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "job spec: launch.ranks_per_node=", l.ranks_per_node(),
          " cannot be placed on any registered worker: ", fits.message()));
    }
  }
  const int64_t active = table_.ActiveCount();
  if (active >= options_.limits.max_active_jobs) {
    return absl::ResourceExhaustedError(absl::StrCat(
        active, " jobs are pending or running; this coordinator keeps at most ",
        options_.limits.max_active_jobs,
        " (strata-coordinator --max-active-jobs): wait or cancel some"));
  }
  ActiveTotals totals;
  for (const auto& [id, rt] : table_.active()) {
    if (JobTable::IsActive(rt.info.state())) totals.Add(rt.info.spec());
  }
  return CheckActiveLimits(spec, totals, options_.limits);  // job_limits.h
}

StatusOr<std::string> JobManager::Submit(const JobSpec& spec,
                                         const WorkerRegistry* registry,
                                         const std::string& owner) {
  RETURN_IF_ERROR(CheckSubmit(spec, registry));
  std::string id = absl::StrCat("job-", next_id_);
  control::JobInfo info;
  info.set_job_id(id);
  *info.mutable_spec() = spec;
  info.set_state(control::PENDING);
  info.set_owner(owner);
  info.set_submit_unix_ms(clock_->NowMs());
  info.set_pending_since_unix_ms(clock_->NowMs());
  RETURN_IF_ERROR(
      store_->Write({{"meta/next_job_id", absl::StrCat(next_id_ + 1)},
                     {absl::StrCat("job/", id), info.SerializeAsString()}}));
  ++next_id_;
  table_.AddActive(std::move(info));
  events_->Record(id, 0, "submitted",
                  absl::StrCat("'", spec.name(), "': ",
                               absl::StrJoin(spec.launch().command(), " ")));
  return id;
}

StatusOr<control::JobInfo> JobManager::Get(const std::string& job_id) const {
  return table_.Describe(job_id, clock_->NowMs());
}

std::optional<JobFacts> JobManager::Facts(const std::string& job_id) const {
  const control::JobInfo* held = table_.Held(job_id);
  std::optional<control::JobInfo> stored;
  if (held == nullptr) {
    auto record = table_.Record(job_id);  // aged out of memory
    if (!record.ok()) return std::nullopt;
    held = &stored.emplace(*std::move(record));
  }
  return JobFacts{held->owner(), held->attempt(),
                  held->state() == control::RUNNING};
}

StatusOr<control::JobInfo> JobManager::Cancel(const std::string& job_id) {
  ASSIGN_OR_RETURN(JobRuntime * rt,
                   table_.Lookup(job_id, JobTable::Need::kActive));
  RETURN_IF_ERROR(Finish(*rt, control::CANCELLED, "cancelled by user"));
  control::JobInfo out = rt->info;
  Retire();
  return out;
}

control::JobsReply JobManager::List(bool with_steps, const std::string& after,
                                    int64_t page_bytes) const {
  return table_.List(clock_->NowMs(), with_steps, after, page_bytes);
}

control::JobsReply JobManager::Summaries() const {
  return table_.List(clock_->NowMs(), /*with_steps=*/true, "", 0,
                     /*summary=*/true);
}

Status JobManager::Finish(JobRuntime& rt, control::JobState state,
                          const std::string& message) {
  control::JobInfo next = rt.info;
  SetEnd(next, state, message, clock_->NowMs());
  RETURN_IF_ERROR(Commit(rt, std::move(next)));
  Ended(rt);
  return absl::OkStatus();
}

void JobManager::Ended(JobRuntime& rt) {
  const control::JobInfo& job = rt.info;
  rt.goodput.OnJobEnd(job.end_unix_ms() > 0 ? job.end_unix_ms()
                                            : clock_->NowMs());
  goodput_.Save(rt);
  const control::JobState state = job.state();
  std::string kind = state == control::SUCCEEDED   ? "succeeded"
                     : state == control::CANCELLED ? "cancelled"
                                                   : "failed";
  events_->Record(job.job_id(), job.attempt(), kind, job.message());
  Status s = kv_->DeletePrefix(job.job_id() + "/");
  if (!s.ok())
    logger_->warn("dropping KV keys of {}: {}", job.job_id(), s.ToString());
  if (options_.rank_keys != nullptr) options_.rank_keys->Forget(job.job_id());
  table_.MarkEnded(job.job_id());
}

void JobManager::IssueRankKeys(const control::JobInfo& job) {
  if (options_.rank_keys == nullptr) return;
  for (int r = 0; r < job.ranks_size(); ++r) {
    options_.rank_keys->Issue(job.job_id(), job.attempt(), r);
  }
}

Status JobManager::FailAttempt(JobRuntime& rt, const std::string& reason) {
  const control::JobInfo& job = rt.info;
  const int failed_attempt = job.attempt();
  rt.goodput.OnAttemptEnd(clock_->NowMs());
  control::JobInfo next = job;
  const bool restart = job.restart_count() < job.spec().launch().max_restarts();
  if (!restart) {
    SetEnd(next, control::FAILED,
           absl::StrCat(reason, " (no restarts left: max_restarts=",
                        job.spec().launch().max_restarts(), ")"),
           clock_->NowMs());
  }
  fault::RestartBackoff::Decision backoff;
  if (restart) {
    if (!rt.backoff) rt.backoff.emplace();
    backoff = rt.backoff->OnFailure(
        job.start_unix_ms() > 0 ? clock_->NowMs() - job.start_unix_ms() : 0,
        !rt.latest_steps.empty(),  // this attempt's reports
        clock_->SteadyNowMs());
    next.set_restart_count(job.restart_count() + 1);
    next.set_attempt(next.restart_count());
    next.set_state(control::PENDING);
    next.set_message(absl::StrCat(reason, "; ", backoff.Describe()));
    next.clear_ranks();
    next.set_start_unix_ms(0);
    next.set_pending_since_unix_ms(clock_->NowMs());
  }
  RETURN_IF_ERROR(Commit(rt, std::move(next)));
  events_->Record(job.job_id(), failed_attempt, "attempt_failed", reason);
  Status s = kv_->DeletePrefix(AttemptKey(job.job_id(), failed_attempt) + "/");
  if (!s.ok())
    logger_->warn("dropping KV keys of {}: {}", job.job_id(), s.ToString());
  rt.latest_steps.clear();
  if (!restart) {
    Ended(rt);
    return absl::OkStatus();
  }
  rt.restart.began_ms = clock_->SteadyNowMs();
  events_->Record(
      job.job_id(), job.attempt(), "restarting",
      absl::StrCat("restart ", job.restart_count(), " of ",
                   job.spec().launch().max_restarts(), " after: ", reason,
                   "; ", backoff.Describe()));
  (void)logs_->Note(job.job_id(),
                    absl::StrCat("[strata] attempt ", job.attempt(),
                                 ": restarting after: ", reason));
  return absl::OkStatus();
}

void JobManager::Tick(const WorkerRegistry& registry) {
  // Nothing can be recorded: leave every job as it is on disk until the
  // store recovers (StateStore::MaybeResume, called by the event loop).
  if (!Writable()) return;
  for (auto& [id, rt] : table_.active()) {
    const control::JobInfo& job = rt.info;
    if (job.state() == control::RUNNING) CheckWorkers(rt, registry);
    // A success whose write failed while the store was unwritable.
    if (job.state() == control::RUNNING && job.ranks_size() > 0 &&
        std::all_of(job.ranks().begin(), job.ranks().end(),
                    ExitedZero)) {
      (void)Finish(rt, control::SUCCEEDED,
                   absl::StrCat("all ", job.ranks_size(), " ranks exited 0"));
    }
    if (job.state() == control::RUNNING) faults_.Tick(rt);
    if (job.state() == control::RUNNING) KeepSpares(rt, registry);
    if (job.state() == control::RUNNING) CheckInPlace(rt);
    if (job.state() == control::PENDING &&
        (!rt.backoff || rt.backoff->Ready(clock_->SteadyNowMs()))) {
      TryPlace(rt, registry);  // restart_backoff.h
    }
  }
  goodput_.SaveDue(table_);
  Retire();
}

StatusOr<control::JobInfo> JobManager::SetFaultPolicy(
    const std::string& job_id,
    const google::protobuf::RepeatedPtrField<std::string>& settings) {
  ASSIGN_OR_RETURN(JobRuntime * rt,
                   table_.Lookup(job_id, JobTable::Need::kActive));
  control::JobInfo next = rt->info;
  for (const std::string& kv : settings) {
    RETURN_IF_ERROR(
        fault::ApplyFaultSetting(kv, next.mutable_spec()->mutable_fault()));
  }
  RETURN_IF_ERROR(planner::ValidateJob(next.spec(), "job " + job_id));
  RETURN_IF_ERROR(Commit(*rt, std::move(next)));
  // The detectors (and the attempt's kept steps) start over with the new
  // thresholds.
  FaultHandler::Reset(*rt);
  rt->trace = TraceBuffer();
  events_->Record(job_id, rt->info.attempt(), "fault_policy",
                  absl::StrCat("set ", absl::StrJoin(settings, " ")));
  return rt->info;
}

StatusOr<control::TraceReply> JobManager::Trace(
    const control::TraceRequest& request, const WorkerRegistry& registry) {
  const std::string& job_id = request.job_id();
  RETURN_IF_ERROR(table_.Lookup(job_id, JobTable::Need::kAny).status());
  const int64_t first = request.first_step(), last = request.last_step();
  if (first < 0 || last < 0 || (last > 0 && first > last) ||
      request.newest_steps() < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("bad step range ", first, ":", last, " (newest ",
                     request.newest_steps(), ")"));
  }
  ASSIGN_OR_RETURN(
      JobRuntime * rt,
      table_.Lookup(job_id, JobTable::Need::kRunning,
                    "traces come from the ranks of a running attempt"));
  return traces_.Reply(*rt, request, registry);
}

void JobManager::OnTraces(
    const google::protobuf::RepeatedPtrField<control::RankTrace>& t) {
  traces_.OnTraces(table_, t);
}

void JobManager::OnFlights(
    const google::protobuf::RepeatedPtrField<control::RankFlight>& f) {
  faults_.OnFlights(table_, f);
}

std::vector<control::StepReport> JobManager::Curve(
    const std::string& job_id) const {
  const JobRuntime* rt = table_.FindActive(job_id);
  return rt == nullptr ? std::vector<control::StepReport>{}
                       : TraceCollector::Curve(*rt);
}

StatusOr<control::DiagnoseReply> JobManager::Diagnose(
    const control::DiagnoseRequest& request) const {
  ASSIGN_OR_RETURN(const JobRuntime* rt,
                   table_.Lookup(request.job_id(), JobTable::Need::kAny));
  return FaultHandler::Diagnose(rt, request);
}

}  // namespace strata::coordinator
