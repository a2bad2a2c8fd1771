#include "coordinator/jobs/job_manager.h"

#include <algorithm>
#include <set>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "common/net.h"
#include "control/codec.h"
#include "coordinator/jobs/attempt_plan.h"
#include "planner/job.h"

namespace strata::coordinator {

using control::AttemptKey;

namespace {

std::string DescribeExit(const control::RankReport& r) {
  if (r.state() == control::RANK_FAILED_TO_START) {
    return absl::StrCat("failed to start: ", r.message());
  }
  if (r.signal() != 0) return absl::StrCat("killed by signal ", r.signal());
  return absl::StrCat("exited with code ", r.exit_code());
}

bool ExitedZero(const control::RankReport& r) {
  return r.state() == control::RANK_EXITED && r.exit_code() == 0 &&
         r.signal() == 0;
}

bool Failed(const control::RankReport& r) {
  return r.state() == control::RANK_FAILED_TO_START ||
         (r.state() == control::RANK_EXITED &&
          (r.exit_code() != 0 || r.signal() != 0));
}

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
      logger_(GetLogger("CTRL")) {}

bool JobManager::Active(const control::JobInfo& job) {
  return job.state() == control::PENDING || job.state() == control::RUNNING;
}

Status JobManager::Recover() {
  ASSIGN_OR_RETURN(auto rows, store_->Scan("job/"));
  for (const auto& [key, value] : rows) {
    control::JobInfo info;
    if (!info.ParseFromString(value)) {
      return absl::DataLossError(
          absl::StrCat("state record ", key, " does not parse as JobInfo"));
    }
    jobs_[info.job_id()] = info;
  }
  // Jobs stored before the limits (or under looser ones) are failed here,
  // before anything is allocated for them: one of them must not take the
  // coordinator down at every start.
  for (auto& [id, job] : jobs_) {
    if (!Active(job)) continue;
    Status limits = CheckJobLimits(job.spec(), options_.limits);
    if (limits.ok()) continue;
    const std::string reason =
        absl::StrCat("refused at coordinator start: ", limits.message(),
                     " (stored before this limit applied)");
    logger_->error("{}: {}", id, reason);
    Status s = Finish(job, control::FAILED, reason);
    if (!s.ok()) {
      // Not scheduled either way; the next start fails it again.
      SetEnd(job, control::FAILED, reason, clock_->NowMs());
      logger_->error("{}: {}", id, s.ToString());
    }
  }
  // Ranks that outlived a coordinator restart reconnect with the keys they
  // were issued: derive them again (rank_keys.h).
  for (const auto& [id, job] : jobs_) {
    if (job.state() == control::RUNNING) IssueRankKeys(job);
  }
  ASSIGN_OR_RETURN(auto ledgers, store_->Scan("goodput/"));
  for (const auto& [key, value] : ledgers) {
    control::GoodputState state;
    const std::string id = key.substr(std::string("goodput/").size());
    auto job = jobs_.find(id);
    StatusOr<observe::GoodputLedger> ledger =
        state.ParseFromString(value)
            ? observe::GoodputLedger::Restore(state)
            : absl::InvalidArgumentError("does not parse as GoodputState");
    if (job == jobs_.end() || !ledger.ok()) {
      // Accounting only: the job runs on, its goodput counted from now
      // as start-up.
      logger_->warn("state record {} dropped: {}", key,
                    job == jobs_.end() ? "no such job"
                                       : ledger.status().ToString());
      continue;
    }
    // Ended while the ledger's last save was older than the end.
    if (!Active(job->second) && job->second.end_unix_ms() > 0) {
      ledger->OnJobEnd(job->second.end_unix_ms());
    }
    goodput_.insert_or_assign(id, *std::move(ledger));
  }
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

Status JobManager::Resync() {
  std::vector<StateStore::Mutation> rows;
  rows.emplace_back("meta/next_job_id", absl::StrCat(next_id_));
  for (const auto& [id, job] : jobs_) {
    rows.emplace_back(absl::StrCat("job/", id), job.SerializeAsString());
  }
  return store_->Write(rows);
}

Status JobManager::Persist(const control::JobInfo& info) {
  return store_->Put(absl::StrCat("job/", info.job_id()),
                     info.SerializeAsString());
}

Status JobManager::Commit(control::JobInfo& job, control::JobInfo next) {
  RETURN_IF_ERROR(Persist(next));
  job = std::move(next);
  return absl::OkStatus();
}

int64_t JobManager::WaitMs(const control::JobInfo& job) const {
  int s = job.spec().launch().worker_wait_s();
  return s > 0 ? s * 1000LL : options_.default_worker_wait_ms;
}

StatusOr<std::string> JobManager::Submit(const JobSpec& spec,
                                         const WorkerRegistry* registry,
                                         const std::string& owner) {
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
  const int64_t active =
      std::count_if(jobs_.begin(), jobs_.end(),
                    [](const auto& j) { return Active(j.second); });
  if (active >= options_.limits.max_active_jobs) {
    return absl::ResourceExhaustedError(absl::StrCat(
        active, " jobs are pending or running; this coordinator keeps at most ",
        options_.limits.max_active_jobs,
        " (strata-coordinator --max-active-jobs): wait or cancel some"));
  }
  RETURN_IF_ERROR(CheckActiveLimits(spec, SumActive(jobs_, Active),
                                    options_.limits));  // job_limits.h
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
  jobs_[id] = info;
  events_->Record(
      id, 0, "submitted",
      absl::StrCat("'", spec.name(), "': ", absl::StrJoin(l.command(), " ")));
  return id;
}

StatusOr<control::JobInfo> JobManager::Get(const std::string& job_id) const {
  auto it = jobs_.find(job_id);
  if (it == jobs_.end()) {
    return absl::NotFoundError(absl::StrCat("no job '", job_id, "'"));
  }
  control::JobInfo info = it->second;
  AddSteps(&info);
  AddGoodput(&info);
  return info;
}

void JobManager::AddSteps(control::JobInfo* info) const {
  if (auto s = steps_.find(info->job_id()); s != steps_.end()) {
    for (const auto& [rank, report] : s->second) *info->add_steps() = report;
  }
}

observe::GoodputLedger& JobManager::LedgerOf(const control::JobInfo& job) {
  return goodput_.try_emplace(job.job_id(), job.submit_unix_ms())
      .first->second;
}

void JobManager::SaveLedgers(const std::vector<std::string>& jobs) {
  const int64_t now = clock_->NowMs();
  std::vector<StateStore::Mutation> rows;
  if (jobs.empty()) {
    if (now - goodput_saved_ms_ < kGoodputSaveIntervalMs) return;
    goodput_saved_ms_ = now;
    for (const auto& [id, ledger] : goodput_) {
      auto job = jobs_.find(id);
      if (job == jobs_.end() || !Active(job->second)) continue;
      rows.emplace_back(absl::StrCat("goodput/", id),
                        ledger.Save().SerializeAsString());
    }
  }
  for (const auto& id : jobs) {
    if (auto it = goodput_.find(id); it != goodput_.end()) {
      rows.emplace_back(absl::StrCat("goodput/", id),
                        it->second.Save().SerializeAsString());
    }
  }
  if (rows.empty()) return;
  // Not synced: losing the last seconds of accounting in a machine crash
  // is acceptable, a sync per save on the event loop is not.
  Status s = store_->Write(rows, /*sync=*/false);
  if (!s.ok()) logger_->warn("saving goodput: {}", s.ToString());
}

void JobManager::AddGoodput(control::JobInfo* info) const {
  auto it = goodput_.find(info->job_id());
  const observe::Goodput g =
      it != goodput_.end()
          ? it->second.At(clock_->NowMs())
          : observe::GoodputLedger(info->submit_unix_ms())
                .At(info->end_unix_ms() > 0 ? info->end_unix_ms()
                                            : clock_->NowMs());
  *info->mutable_goodput() = observe::ToProto(g);
}

StatusOr<control::JobInfo> JobManager::Cancel(const std::string& job_id) {
  auto it = jobs_.find(job_id);
  if (it == jobs_.end()) {
    return absl::NotFoundError(absl::StrCat("no job '", job_id, "'"));
  }
  control::JobInfo& job = it->second;
  if (!Active(job)) {
    return absl::FailedPreconditionError(
        absl::StrCat("job ", job_id, " already ended (",
                     control::JobState_Name(job.state()), ")"));
  }
  RETURN_IF_ERROR(Finish(job, control::CANCELLED, "cancelled by user"));
  return job;
}

control::JobsReply JobManager::List(bool with_steps) const {
  control::JobsReply reply;
  for (const auto& [id, info] : jobs_) {
    control::JobInfo* out = reply.add_jobs();
    *out = info;
    if (with_steps) AddSteps(out);
    AddGoodput(out);
  }
  return reply;
}

Status JobManager::Finish(control::JobInfo& job, control::JobState state,
                          const std::string& message) {
  control::JobInfo next = job;
  SetEnd(next, state, message, clock_->NowMs());
  RETURN_IF_ERROR(Commit(job, std::move(next)));
  Ended(job);
  return absl::OkStatus();
}

void JobManager::Ended(const control::JobInfo& job) {
  LedgerOf(job).OnJobEnd(job.end_unix_ms() > 0 ? job.end_unix_ms()
                                                : clock_->NowMs());
  SaveLedgers({job.job_id()});
  watched_.erase(job.job_id());
  restart_began_ms_.erase(job.job_id());
  backoff_.erase(job.job_id());
  restart_cost_ms_.erase(job.job_id());
  const control::JobState state = job.state();
  std::string kind = state == control::SUCCEEDED   ? "succeeded"
                     : state == control::CANCELLED ? "cancelled"
                                                   : "failed";
  events_->Record(job.job_id(), job.attempt(), kind, job.message());
  Status s = kv_->DeletePrefix(job.job_id() + "/");
  if (!s.ok())
    logger_->warn("dropping KV keys of {}: {}", job.job_id(), s.ToString());
  declared_steps_.erase(job.job_id());
  if (options_.rank_keys != nullptr) options_.rank_keys->Forget(job.job_id());
}

void JobManager::IssueRankKeys(const control::JobInfo& job) {
  if (options_.rank_keys == nullptr) return;
  for (int r = 0; r < job.ranks_size(); ++r) {
    options_.rank_keys->Issue(job.job_id(), job.attempt(), r);
  }
}

Status JobManager::FailAttempt(control::JobInfo& job,
                               const std::string& reason) {
  const int failed_attempt = job.attempt();
  LedgerOf(job).OnAttemptEnd(clock_->NowMs());
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
    auto steps = steps_.find(job.job_id());  // this attempt's reports
    backoff = backoff_[job.job_id()].OnFailure(
        job.start_unix_ms() > 0 ? clock_->NowMs() - job.start_unix_ms() : 0,
        steps != steps_.end() && !steps->second.empty(),
        clock_->SteadyNowMs());
    next.set_restart_count(job.restart_count() + 1);
    next.set_attempt(next.restart_count());
    next.set_state(control::PENDING);
    next.set_message(absl::StrCat(reason, "; ", backoff.Describe()));
    next.clear_ranks();
    next.set_start_unix_ms(0);
    next.set_pending_since_unix_ms(clock_->NowMs());
  }
  RETURN_IF_ERROR(Commit(job, std::move(next)));
  events_->Record(job.job_id(), failed_attempt, "attempt_failed", reason);
  Status s = kv_->DeletePrefix(AttemptKey(job.job_id(), failed_attempt) + "/");
  if (!s.ok())
    logger_->warn("dropping KV keys of {}: {}", job.job_id(), s.ToString());
  steps_.erase(job.job_id());
  if (restart) restart_began_ms_[job.job_id()] = clock_->SteadyNowMs();
  if (!restart) {
    Ended(job);
    return absl::OkStatus();
  }
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
  for (auto& [id, job] : jobs_) {
    if (job.state() == control::RUNNING) {
      for (const auto& node : job.node_info()) {
        const control::WorkerInfo* w = registry.Find(node.worker_id());
        // Unknown: not re-registered since a coordinator restart.
        bool lost = w != nullptr ? !w->alive() : !registry.Settling();
        if (lost) {
          events_->Record(id, job.attempt(), "worker_lost",
                          absl::StrCat(node.worker_id(), " (node ",
                                       node.node_name(), ") lost"));
          (void)FailAttempt(job, absl::StrCat("worker ", node.worker_id(),
                                              " lost (no heartbeat)"));
          break;
        }
      }
    }
    // A success whose write failed while the store was unwritable.
    if (job.state() == control::RUNNING && job.ranks_size() > 0 &&
        std::all_of(job.ranks().begin(), job.ranks().end(), ExitedZero)) {
      (void)Finish(job, control::SUCCEEDED,
                   absl::StrCat("all ", job.ranks_size(), " ranks exited 0"));
    }
    if (job.state() == control::RUNNING) WatchTick(job);
    if (job.state() == control::PENDING &&
        (!backoff_.contains(id) ||
         backoff_.at(id).Ready(clock_->SteadyNowMs())))  // restart_backoff.h
      TryPlace(job, registry);
  }
  SaveLedgers();
}

void JobManager::TryPlace(control::JobInfo& job,
                          const WorkerRegistry& registry) {
  const int64_t now = clock_->NowMs();
  const JobLaunch& l = job.spec().launch();
  std::set<std::string> assigned;
  for (const auto& [id, other] : jobs_) {
    if (other.state() != control::RUNNING) continue;
    for (const auto& n : other.node_info()) assigned.insert(n.worker_id());
  }
  std::vector<control::WorkerInfo> idle;
  int alive_free = 0, draining = 0, alive = 0;
  Status too_small = absl::OkStatus();  // why a worker cannot host the job
  int too_small_alive = 0;
  const control::ListWorkersReply workers = registry.List();
  const auto& evicted = job.evicted_nodes();
  for (const auto& w : workers.workers()) {
    if (!w.alive()) continue;
    if (std::find(evicted.begin(), evicted.end(), w.node_name()) !=
        evicted.end()) {
      continue;  // a fault policy took it away from this job
    }
    ++alive;
    // Sizes the worker's probe would give the job are checked before any
    // per-rank allocation (ranks_per_node 0 takes the worker's GPU count).
    Status fits = CheckNodeCapacity(RanksPerNode(job.spec(), w.probe()), w,
                                    options_.limits);
    if (!fits.ok()) {
      too_small = fits;
      ++too_small_alive;
      continue;
    }
    if (assigned.contains(w.worker_id())) continue;
    ++alive_free;
    if (w.holds_size() > 0) {
      ++draining;
    } else {
      idle.push_back(w);
    }
  }
  if (alive > 0 && too_small_alive == alive) {
    (void)Finish(job, control::FAILED,
                 absl::StrCat("cannot be placed: ", too_small.message()));
    return;
  }
  const int want = std::min(l.nodes() > 0 ? l.nodes() : std::max(1, alive_free),
                            options_.limits.max_nodes);
  const int min_nodes = l.min_nodes() > 0 ? l.min_nodes() : want;
  int take = 0;
  if (static_cast<int>(idle.size()) >= want) {
    take = want;
  } else if (job.attempt() > 0 && draining == 0 &&
             static_cast<int>(idle.size()) >= min_nodes) {
    take = static_cast<int>(idle.size());  // shrink: re-planned below
  } else {
    // Not while workers may still be re-registering after a restart or a
    // pause of the coordinator.
    // Waited on the steady clock from the first look at this attempt (a
    // wall-clock jump must not fail it); a restarted coordinator starts the
    // wait again, as workers need time to return.
    const int64_t steady = clock_->SteadyNowMs();
    auto [since, fresh] = pending_since_steady_ms_.try_emplace(
        job.job_id(), std::pair{job.attempt(), steady});
    if (!fresh && since->second.first != job.attempt()) {
      since->second = {job.attempt(), steady};
    }
    if (!registry.Settling() && steady - since->second.second > WaitMs(job)) {
      (void)Finish(
          job, control::FAILED,
          absl::StrCat(
              "needs ", want, " idle workers (at least ", min_nodes,
              " on restart) but has ", idle.size(), " idle of ",
              registry.AliveCount(), " alive after ", WaitMs(job) / 1000, " s",
              too_small.ok()
                  ? std::string()
                  : absl::StrCat(" (", too_small_alive,
                                 " too small: ", too_small.message(), ")")));
    }
    return;
  }
  idle.resize(take);
  const int64_t world =
      static_cast<int64_t>(RanksPerNode(job.spec(), idle[0].probe())) * take;
  if (world > options_.limits.max_ranks) {
    (void)Finish(job, control::FAILED,
                 absl::StrCat("attempt ", job.attempt(), " would have ", world,
                              " ranks on ", take,
                              " nodes; this coordinator allows at most ",
                              options_.limits.max_ranks,
                              " (strata-coordinator --max-ranks)"));
    return;
  }
  const double scale = StoredComputeScale(CalibrationKey(idle));
  auto plan = PlanAttempt(job.spec(), idle, job.node_speed(), scale);
  planned_scale_[job.job_id()] = scale;
  if (plan.ok()) {
    Status fits = CheckLaunchOrderSize(
        job.spec(), RanksPerNode(job.spec(), idle[0].probe()),
        PlanFileJson(*plan).size());
    if (!fits.ok()) plan = fits;
  }
  if (!plan.ok()) {
    (void)Finish(job, control::FAILED,
                 absl::StrCat("planning attempt ", job.attempt(), " on ", take,
                              " nodes: ", plan.status().message()));
    return;
  }
  // MASTER_PORT: rank 0 runs on a worker host; for `strata run`, Slurm's
  // first node and tests that is this host (documented limitation).
  auto port = net::PickFreePort();
  if (!port.ok()) {
    (void)Finish(job, control::FAILED, std::string(port.status().message()));
    return;
  }
  // Re-planned: the attempt runs on other nodes or another layout than the
  // previous one (eviction, or a shrink after lost workers).
  const Plan& was = job.plan();
  const bool replanned =
      job.attempt() > 0 && job.nodes_size() > 0 &&
      (job.nodes_size() != take || was.tp() != plan->tp() ||
       was.pp() != plan->pp() || was.dp() != plan->dp() ||
       !std::equal(was.layers_per_stage().begin(),
                   was.layers_per_stage().end(),
                   plan->layers_per_stage().begin(),
                   plan->layers_per_stage().end()));
  auto layout = [](const Plan& p, int nodes) {
    return absl::StrCat(
        "tp=", p.tp(), " pp=", p.pp(), " dp=", p.dp(),
        p.pp() > 1 && p.layers_per_stage_size() > 0
            ? absl::StrCat(" layers [", absl::StrJoin(p.layers_per_stage(), ","),
                           "]")
            : "",
        " on ", nodes, " nodes");
  };
  const std::string was_text = layout(was, job.nodes_size());
  control::JobInfo next = job;
  *next.mutable_plan() = *plan;
  next.clear_nodes();
  next.clear_node_info();
  std::vector<std::string> names;
  for (const auto& w : idle) {
    next.add_nodes(w.worker_id());
    control::WorkerInfo* n = next.add_node_info();
    *n = w;
    n->clear_holds();
    names.push_back(w.node_name());
  }
  next.set_master_port(*port);
  next.clear_ranks();
  for (int r = 0; r < plan->placement().ranks_size(); ++r) {
    control::RankReport* rr = next.add_ranks();
    rr->set_job_id(job.job_id());
    rr->set_attempt(job.attempt());
    rr->set_rank(r);
  }
  next.set_state(control::RUNNING);
  next.set_start_unix_ms(now);
  if (!Commit(job, std::move(next)).ok()) return;  // still PENDING; retried
  events_->Record(job.job_id(), job.attempt(), "launched",
                  absl::StrCat(plan->placement().ranks_size(), " ranks on ",
                               take, " nodes [", absl::StrJoin(names, ", "),
                               "]: tp=", plan->tp(), " pp=", plan->pp(), " dp=",
                               plan->dp(), " cp=", std::max(1, plan->cp())));
  if (replanned) {
    events_->Record(
        job.job_id(), job.attempt(), "replanned",
        absl::StrCat(layout(*plan, take), " (was ", was_text, ")",
                     job.evicted_nodes_size() > 0
                         ? absl::StrCat("; evicted: ",
                                        absl::StrJoin(job.evicted_nodes(), ","))
                         : "",
                     job.node_speed_size() > 0
                         ? absl::StrCat(
                               "; node speeds: ",
                               absl::StrJoin(
                                   std::map<std::string, double>(
                                       job.node_speed().begin(),
                                       job.node_speed().end()),
                                   ",",
                                   [](std::string* out, const auto& kv) {
                                     absl::StrAppendFormat(out, "%s=%.2f",
                                                           kv.first, kv.second);
                                   }))
                         : ""));
  }
}

void JobManager::OnWorkerReport(
    const std::string& worker_id,
    const google::protobuf::RepeatedPtrField<control::RankReport>& ranks,
    control::HeartbeatReply* orders) {
  std::set<std::string> stop;
  std::set<std::pair<std::string, int>>
      held;  // (job, rank) of current attempts
  std::set<std::string> touched;
  for (const auto& r : ranks) {
    auto it = jobs_.find(r.job_id());
    if (it == jobs_.end() || it->second.state() != control::RUNNING ||
        it->second.attempt() != r.attempt() || r.rank() < 0 ||
        r.rank() >= it->second.ranks_size()) {
      stop.insert(AttemptKey(r.job_id(), r.attempt()));
      continue;
    }
    if (!PlacedOn(worker_id, r.job_id(), r.attempt(), r.rank())) {
      // A rank this worker was never given: it must not speak for it
      // (docs/security.md "Telemetry"). Whatever it runs of that attempt
      // is stopped.
      logger_->warn("{} reported rank {} of {} attempt {}, which is not "
                    "placed on it; ignored",
                    worker_id, r.rank(), r.job_id(), r.attempt());
      stop.insert(AttemptKey(r.job_id(), r.attempt()));
      continue;
    }
    control::JobInfo& job = it->second;
    held.insert({job.job_id(), r.rank()});
    control::RankReport* cur = job.mutable_ranks(r.rank());
    if (cur->state() == r.state() && cur->pid() == r.pid()) continue;
    const bool exited = r.state() == control::RANK_EXITED ||
                        r.state() == control::RANK_FAILED_TO_START;
    // An exit cannot be acted on while the store is unwritable: it stays
    // unseen, and the worker reports it again with its next heartbeat.
    if (exited && !Writable()) continue;
    const control::RankReport before = *cur;
    *cur = r;
    touched.insert(job.job_id());
    if (exited) {
      events_->Record(job.job_id(), job.attempt(), "rank_exited",
                      absl::StrCat("rank ", r.rank(), " on ", worker_id, " ",
                                   DescribeExit(r)));
    }
    if (Failed(r)) {
      Status s =
          FailAttempt(job, absl::StrCat("rank ", r.rank(), " on ", worker_id,
                                        " ", DescribeExit(r)));
      if (!s.ok()) {
        *cur = before;  // seen again with the next report
        continue;
      }
      stop.insert(AttemptKey(r.job_id(), r.attempt()));
    }
  }
  for (auto& [id, job] : jobs_) {
    if (job.state() != control::RUNNING) continue;
    const AttemptIndex& index = Index(job);
    auto node = index.node_of_worker.find(worker_id);
    if (node == index.node_of_worker.end()) continue;
    std::vector<int> to_launch;
    for (int rank : index.ranks_of_node[node->second]) {
      if (held.contains({id, rank})) continue;
      if (job.ranks(rank).state() == control::RANK_STATE_UNSPECIFIED) {
        to_launch.push_back(rank);
        continue;
      }
      const int attempt = job.attempt();
      to_launch.clear();
      if (FailAttempt(job, absl::StrCat("rank ", rank, " vanished from ",
                                        worker_id, " (worker restarted?)"))
              .ok()) {
        stop.insert(AttemptKey(id, attempt));
      }
      break;
    }
    if (job.state() != control::RUNNING) continue;
    auto launches = BuildLaunches(job, to_launch, index.plan_json);
    if (!launches.ok()) {
      (void)Finish(job, control::FAILED,
                   absl::StrCat("attempt ", job.attempt(), ": ",
                                launches.status().message()));
      continue;
    }
    for (auto& l : *launches) {
      if (options_.rank_keys != nullptr) {
        control::CurveKeyPair keys =
            options_.rank_keys->Issue(id, job.attempt(), l.rank());
        l.set_curve_public_key(keys.public_key);
        l.set_curve_secret_key(keys.secret_key);
      }
      *orders->add_launch() = std::move(l);
    }
    if (touched.contains(id) &&
        std::all_of(job.ranks().begin(), job.ranks().end(), ExitedZero)) {
      (void)Finish(job, control::SUCCEEDED,
                   absl::StrCat("all ", job.ranks_size(), " ranks exited 0"));
    }
  }
  AddDiagnoseOrders(worker_id, orders);
  AddTraceOrders(worker_id, orders);
  // Rank states are not persisted on every change: after a coordinator
  // restart the workers report them again on re-registration.
  for (const auto& key : stop) orders->add_stop(key);
  orders->set_grace_ms(options_.default_grace_ms);
  for (const auto& r : ranks) {
    auto it = jobs_.find(r.job_id());
    if (it != jobs_.end() && it->second.spec().launch().stop_grace_ms() > 0) {
      orders->set_grace_ms(it->second.spec().launch().stop_grace_ms());
    }
  }
}

}  // namespace strata::coordinator
