#include "coordinator/jobs/job_manager.h"

#include <algorithm>
#include <set>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/net.h"
#include "coordinator/jobs/attempt_plan.h"

namespace strata::coordinator {
namespace {

std::string AttemptKey(const std::string& job_id, int attempt) {
  return absl::StrCat(job_id, "/", attempt);
}

std::string DescribeExit(const control::RankReport& r) {
  if (r.state() == control::RANK_FAILED_TO_START) {
    return absl::StrCat("failed to start: ", r.message());
  }
  if (r.signal() != 0) return absl::StrCat("killed by signal ", r.signal());
  return absl::StrCat("exited with code ", r.exit_code());
}

bool Failed(const control::RankReport& r) {
  return r.state() == control::RANK_FAILED_TO_START ||
         (r.state() == control::RANK_EXITED &&
          (r.exit_code() != 0 || r.signal() != 0));
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
    // A pending attempt's wait starts again: workers need time to return.
    if (info.state() == control::PENDING) {
      info.set_pending_since_unix_ms(clock_->NowMs());
    }
    jobs_[info.job_id()] = info;
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

Status JobManager::Persist(const control::JobInfo& info) {
  return store_->Put(absl::StrCat("job/", info.job_id()),
                     info.SerializeAsString());
}

void JobManager::PersistOrLog(const control::JobInfo& info) {
  Status s = Persist(info);
  if (!s.ok()) logger_->error("persisting {}: {}", info.job_id(), s.ToString());
}

int64_t JobManager::WaitMs(const control::JobInfo& job) const {
  int s = job.spec().launch().worker_wait_s();
  return s > 0 ? s * 1000LL : options_.default_worker_wait_ms;
}

StatusOr<std::string> JobManager::Submit(const JobSpec& spec) {
  const JobLaunch& l = spec.launch();
  if (l.command().empty() || l.command(0).empty()) {
    return absl::InvalidArgumentError("job spec: launch.command is empty");
  }
  if (l.nodes() < 0 || l.ranks_per_node() < 0 || l.max_restarts() < 0 ||
      l.min_nodes() < 0 || l.worker_wait_s() < 0 || l.stop_grace_ms() < 0) {
    return absl::InvalidArgumentError(
        "job spec: launch.nodes, ranks_per_node, min_nodes, max_restarts, "
        "worker_wait_s and stop_grace_ms must be >= 0");
  }
  if (l.nodes() > 0 && l.min_nodes() > l.nodes()) {
    return absl::InvalidArgumentError(
        absl::StrCat("job spec: launch.min_nodes (", l.min_nodes(),
                     ") exceeds launch.nodes (", l.nodes(), ")"));
  }
  std::string id = absl::StrCat("job-", next_id_);
  RETURN_IF_ERROR(store_->Put("meta/next_job_id", absl::StrCat(next_id_ + 1)));
  ++next_id_;
  control::JobInfo info;
  info.set_job_id(id);
  *info.mutable_spec() = spec;
  info.set_state(control::PENDING);
  info.set_submit_unix_ms(clock_->NowMs());
  info.set_pending_since_unix_ms(clock_->NowMs());
  RETURN_IF_ERROR(Persist(info));
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
  if (auto s = steps_.find(job_id); s != steps_.end()) {
    for (const auto& [rank, report] : s->second) *info.add_steps() = report;
  }
  return info;
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
  Finish(job, control::CANCELLED, "cancelled by user");
  return job;
}

control::JobsReply JobManager::List() const {
  control::JobsReply reply;
  for (const auto& [id, info] : jobs_) *reply.add_jobs() = info;
  return reply;
}

void JobManager::Finish(control::JobInfo& job, control::JobState state,
                        const std::string& message) {
  job.set_state(state);
  job.set_end_unix_ms(clock_->NowMs());
  job.set_message(message);
  PersistOrLog(job);
  std::string kind = state == control::SUCCEEDED   ? "succeeded"
                     : state == control::CANCELLED ? "cancelled"
                                                   : "failed";
  events_->Record(job.job_id(), job.attempt(), kind, message);
  kv_->DeletePrefix(job.job_id() + "/");
}

void JobManager::FailAttempt(control::JobInfo& job, const std::string& reason) {
  events_->Record(job.job_id(), job.attempt(), "attempt_failed", reason);
  kv_->DeletePrefix(AttemptKey(job.job_id(), job.attempt()) + "/");
  steps_.erase(job.job_id());
  if (job.restart_count() >= job.spec().launch().max_restarts()) {
    Finish(job, control::FAILED,
           absl::StrCat(reason, " (no restarts left: max_restarts=",
                        job.spec().launch().max_restarts(), ")"));
    return;
  }
  job.set_restart_count(job.restart_count() + 1);
  job.set_attempt(job.restart_count());
  job.set_state(control::PENDING);
  job.set_message(reason);
  job.clear_ranks();
  job.set_start_unix_ms(0);
  job.set_pending_since_unix_ms(clock_->NowMs());
  PersistOrLog(job);
  events_->Record(
      job.job_id(), job.attempt(), "restarting",
      absl::StrCat("restart ", job.restart_count(), " of ",
                   job.spec().launch().max_restarts(), " after: ", reason));
  (void)logs_->Note(job.job_id(),
                    absl::StrCat("[strata] attempt ", job.attempt(),
                                 ": restarting after: ", reason));
}

void JobManager::Tick(const WorkerRegistry& registry) {
  const int64_t now = clock_->NowMs();
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
          FailAttempt(job, absl::StrCat("worker ", node.worker_id(),
                                        " lost (no heartbeat)"));
          break;
        }
      }
    }
    if (job.state() == control::PENDING) TryPlace(job, registry);
  }
}

void JobManager::TryPlace(control::JobInfo& job,
                          const WorkerRegistry& registry) {
  const int64_t now = clock_->NowMs();
  std::set<std::string> assigned;
  for (const auto& [id, other] : jobs_) {
    if (other.state() != control::RUNNING) continue;
    for (const auto& n : other.node_info()) assigned.insert(n.worker_id());
  }
  std::vector<control::WorkerInfo> idle;
  int alive_free = 0, draining = 0;
  const control::ListWorkersReply workers = registry.List();
  for (const auto& w : workers.workers()) {
    if (!w.alive() || assigned.contains(w.worker_id())) continue;
    ++alive_free;
    if (w.holds_size() > 0) {
      ++draining;
    } else {
      idle.push_back(w);
    }
  }
  const JobLaunch& l = job.spec().launch();
  const int want = l.nodes() > 0 ? l.nodes() : std::max(1, alive_free);
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
    if (!registry.Settling() &&
        now - job.pending_since_unix_ms() > WaitMs(job)) {
      Finish(job, control::FAILED,
             absl::StrCat("needs ", want, " idle workers (at least ", min_nodes,
                          " on restart) but has ", idle.size(), " idle of ",
                          registry.AliveCount(), " alive after ",
                          WaitMs(job) / 1000, " s"));
    }
    return;
  }
  idle.resize(take);
  auto plan = PlanAttempt(job.spec(), idle);
  if (!plan.ok()) {
    Finish(job, control::FAILED,
           absl::StrCat("planning attempt ", job.attempt(), " on ", take,
                        " nodes: ", plan.status().message()));
    return;
  }
  // MASTER_PORT: rank 0 runs on a worker host; for `strata run`, Slurm's
  // first node and tests that is this host (documented limitation).
  auto port = net::PickFreePort();
  if (!port.ok()) {
    Finish(job, control::FAILED, std::string(port.status().message()));
    return;
  }
  *job.mutable_plan() = *plan;
  job.clear_nodes();
  job.clear_node_info();
  std::vector<std::string> names;
  for (const auto& w : idle) {
    job.add_nodes(w.worker_id());
    control::WorkerInfo* n = job.add_node_info();
    *n = w;
    n->clear_holds();
    names.push_back(w.node_name());
  }
  job.set_master_port(*port);
  job.clear_ranks();
  for (int r = 0; r < plan->placement().ranks_size(); ++r) {
    control::RankReport* rr = job.add_ranks();
    rr->set_job_id(job.job_id());
    rr->set_attempt(job.attempt());
    rr->set_rank(r);
  }
  job.set_state(control::RUNNING);
  job.set_start_unix_ms(now);
  PersistOrLog(job);
  events_->Record(job.job_id(), job.attempt(), "launched",
                  absl::StrCat(plan->placement().ranks_size(), " ranks on ",
                               take, " nodes [", absl::StrJoin(names, ", "),
                               "]: tp=", plan->tp(), " pp=", plan->pp(), " dp=",
                               plan->dp(), " cp=", std::max(1, plan->cp())));
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
    control::JobInfo& job = it->second;
    held.insert({job.job_id(), r.rank()});
    control::RankReport* cur = job.mutable_ranks(r.rank());
    if (cur->state() == r.state() && cur->pid() == r.pid()) continue;
    *cur = r;
    touched.insert(job.job_id());
    if (r.state() == control::RANK_EXITED ||
        r.state() == control::RANK_FAILED_TO_START) {
      events_->Record(job.job_id(), job.attempt(), "rank_exited",
                      absl::StrCat("rank ", r.rank(), " on ", worker_id, " ",
                                   DescribeExit(r)));
    }
    if (Failed(r)) {
      FailAttempt(job, absl::StrCat("rank ", r.rank(), " on ", worker_id, " ",
                                    DescribeExit(r)));
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
      FailAttempt(job, absl::StrCat("rank ", rank, " vanished from ", worker_id,
                                    " (worker restarted?)"));
      stop.insert(AttemptKey(id, attempt));
      to_launch.clear();
      break;
    }
    auto launches = BuildLaunches(job, to_launch, index.plan_json);
    if (!launches.ok()) {
      Finish(job, control::FAILED,
             absl::StrCat("attempt ", job.attempt(), ": ",
                          launches.status().message()));
      continue;
    }
    for (auto& l : *launches) *orders->add_launch() = std::move(l);
    if (job.state() == control::RUNNING && touched.contains(id) &&
        std::all_of(job.ranks().begin(), job.ranks().end(),
                    [](const control::RankReport& r) {
                      return r.state() == control::RANK_EXITED &&
                             r.exit_code() == 0 && r.signal() == 0;
                    })) {
      Finish(job, control::SUCCEEDED,
             absl::StrCat("all ", job.ranks_size(), " ranks exited 0"));
    }
  }
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

const JobManager::AttemptIndex& JobManager::Index(const control::JobInfo& job) {
  AttemptIndex& index = index_[job.job_id()];
  if (index.attempt == job.attempt() && !index.plan_json.empty()) return index;
  index = AttemptIndex();
  index.attempt = job.attempt();
  index.plan_json = PlanFileJson(job.plan());
  for (int i = 0; i < job.node_info_size(); ++i) {
    index.node_of_worker[job.node_info(i).worker_id()] = i;
  }
  index.ranks_of_node.resize(job.node_info_size());
  for (const auto& r : job.plan().placement().ranks()) {
    if (r.node() >= 0 && r.node() < job.node_info_size()) {
      index.ranks_of_node[r.node()].push_back(r.rank());
    }
  }
  return index;
}

void JobManager::OnLogs(
    const google::protobuf::RepeatedPtrField<control::LogChunk>& chunks) {
  for (const auto& c : chunks) {
    if (!jobs_.contains(c.job_id())) continue;
    Status s = logs_->Append(c);
    if (!s.ok())
      logger_->warn("storing output of {}: {}", c.job_id(), s.ToString());
  }
}

void JobManager::OnSteps(
    const google::protobuf::RepeatedPtrField<control::StepReport>& steps) {
  for (const auto& s : steps) {
    auto it = jobs_.find(s.job_id());
    if (it == jobs_.end() || it->second.state() != control::RUNNING) continue;
    steps_[s.job_id()][s.rank()] = s;
  }
}

}  // namespace strata::coordinator
