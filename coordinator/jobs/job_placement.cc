// JobManager's scheduling: worker loss of running attempts and placement of
// pending ones on idle workers (docs/control-plane.md "Placement").
#include <algorithm>
#include <set>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "common/net.h"
#include "coordinator/jobs/attempt_plan.h"
#include "coordinator/jobs/job_manager.h"
#include "coordinator/jobs/job_spares.h"
#include "coordinator/jobs/placement_task.h"

namespace strata::coordinator {

namespace {

// The alive workers as one pending attempt sees them.
struct WorkerSurvey {
  std::vector<control::WorkerInfo> idle;  // free and holding nothing
  int alive = 0;       // alive and not evicted from the job
  int alive_free = 0;  // of those, big enough and not given to a job
  int draining = 0;    // of those, still stopping an earlier attempt
  Status too_small = absl::OkStatus();  // why a worker cannot host the job
  int too_small_alive = 0;
};

WorkerSurvey Survey(const control::JobInfo& job,
                    const control::ListWorkersReply& workers,
                    const std::set<std::string>& assigned,
                    const JobLimits& limits) {
  WorkerSurvey s;
  const auto& evicted = job.evicted_nodes();
  for (const auto& w : workers.workers()) {
    if (!w.alive()) continue;
    if (std::find(evicted.begin(), evicted.end(), w.node_name()) !=
        evicted.end()) {
      continue;  // a fault policy took it away from this job
    }
    ++s.alive;
    // Sizes the worker's probe would give the job are checked before any
    // per-rank allocation (ranks_per_node 0 takes the worker's GPU count).
    Status fits =
        CheckNodeCapacity(RanksPerNode(job.spec(), w.probe()), w, limits);
    if (!fits.ok()) {
      s.too_small = fits;
      ++s.too_small_alive;
      continue;
    }
    if (assigned.contains(w.worker_id())) continue;
    ++s.alive_free;
    if (w.holds_size() > 0) {
      ++s.draining;
    } else {
      s.idle.push_back(w);
    }
  }
  return s;
}

// How many nodes the attempt wants, the fewest a restart may shrink to, and
// how many of the idle ones it takes now (0: wait). A first attempt waits
// for all it wants; a restart takes fewer (re-planned) once nothing drains.
struct NodeCount {
  int want = 0, min_nodes = 0, take = 0;
};
NodeCount CountNodes(const control::JobInfo& job, const WorkerSurvey& s,
                     int max_nodes) {
  const JobLaunch& l = job.spec().launch();
  NodeCount n;
  n.want =
      std::min(l.nodes() > 0 ? l.nodes() : std::max(1, s.alive_free), max_nodes);
  n.min_nodes = l.min_nodes() > 0 ? l.min_nodes() : n.want;
  const int idle = static_cast<int>(s.idle.size());
  if (idle >= n.want) {
    n.take = n.want;
  } else if (job.attempt() > 0 && s.draining == 0 && idle >= n.min_nodes) {
    n.take = idle;  // shrink: re-planned
  }
  return n;
}

std::string Layout(const Plan& p, int nodes) {
  return absl::StrCat(
      "tp=", p.tp(), " pp=", p.pp(), " dp=", p.dp(),
      p.pp() > 1 && p.layers_per_stage_size() > 0
          ? absl::StrCat(" layers [", absl::StrJoin(p.layers_per_stage(), ","),
                         "]")
          : "",
      " on ", nodes, " nodes");
}

// Whether the attempt runs on other nodes or another layout than the
// previous one (eviction, or a shrink after lost workers).
bool Replanned(const control::JobInfo& job, const Plan& plan, int nodes) {
  const Plan& was = job.plan();
  return job.attempt() > 0 && job.nodes_size() > 0 &&
         (job.nodes_size() != nodes || was.tp() != plan.tp() ||
          was.pp() != plan.pp() || was.dp() != plan.dp() ||
          !std::equal(was.layers_per_stage().begin(),
                      was.layers_per_stage().end(),
                      plan.layers_per_stage().begin(),
                      plan.layers_per_stage().end()));
}

// The "replanned" event: new layout, the one it replaces, why.
std::string ReplannedText(const control::JobInfo& job, const Plan& plan,
                          int nodes, const std::string& was) {
  std::string text = absl::StrCat(Layout(plan, nodes), " (was ", was, ")");
  if (job.evicted_nodes_size() > 0) {
    absl::StrAppend(&text, "; evicted: ",
                    absl::StrJoin(job.evicted_nodes(), ","));
  }
  if (job.node_speed_size() > 0) {
    const std::map<std::string, double> speeds(job.node_speed().begin(),
                                               job.node_speed().end());
    absl::StrAppend(&text, "; node speeds: ",
                    absl::StrJoin(speeds, ",", [](std::string* out,
                                                  const auto& kv) {
                      absl::StrAppendFormat(out, "%s=%.2f", kv.first,
                                            kv.second);
                    }));
  }
  return text;
}

}  // namespace

void JobManager::CheckWorkers(JobRuntime& rt, const WorkerRegistry& registry) {
  std::vector<int> lost;
  for (int i = 0; i < rt.info.node_info_size(); ++i) {
    const control::WorkerInfo& node = rt.info.node_info(i);
    const control::WorkerInfo* w = registry.Find(node.worker_id());
    // Unknown: not re-registered since a coordinator restart.
    if (w != nullptr ? !w->alive() : !registry.Settling()) lost.push_back(i);
  }
  if (lost.empty()) return;
  for (int i : lost) {
    const control::WorkerInfo& node = rt.info.node_info(i);
    events_->Record(rt.info.job_id(), rt.info.attempt(), "worker_lost",
                    absl::StrCat(node.worker_id(), " (node ", node.node_name(),
                                 ") lost"));
  }
  // Opted in and a spare idle: the others keep running (job_inplace_node.cc).
  if (ReplaceNodesInPlace(rt, registry, lost)) return;
  (void)FailAttempt(rt, absl::StrCat("worker ",
                                     rt.info.node_info(lost[0]).worker_id(),
                                     " lost (no heartbeat)"));
}

std::set<std::string> JobManager::TakenByOthers(const std::string& job_id) {
  std::set<std::string> taken;
  for (const auto& [id, other] : table_.active()) {
    if (id != job_id) AddTaken(other.info, &taken);
  }
  return taken;
}

void JobManager::TryPlace(JobRuntime& rt, const WorkerRegistry& registry) {
  if (rt.placing != nullptr) {  // computed off the loop: apply when done
    if (rt.placing->done()) ApplyPlacement(rt, registry);
    return;
  }
  const control::JobInfo& job = rt.info;
  // Other jobs' nodes and reserved spares are not for this job.
  const std::set<std::string> taken = TakenByOthers(job.job_id());
  const control::ListWorkersReply workers = registry.List();
  WorkerSurvey s = Survey(job, workers, taken, options_.limits);
  if (s.alive > 0 && s.too_small_alive == s.alive) {
    (void)Finish(rt, control::FAILED,
                 absl::StrCat("cannot be placed: ", s.too_small.message()));
    return;
  }
  // A restart after a lost node: the previous nodes with spares in the
  // holes, the same plan (docs/fault.md "Hot spares").
  SpareSwap swap = PlanSpareSwap(job, workers, s.idle, taken);
  if (swap.kind == SpareSwap::Kind::kWait) {  // a node still draining
    WaitForWorkers(rt, registry,
                   absl::StrCat("a node of attempt ", job.attempt() - 1,
                                " did not stop its ranks within ",
                                WaitMs(job) / 1000, " s"));
    return;
  }
  if (swap.kind == SpareSwap::Kind::kReady) {
    auto port = net::PickFreePort();
    if (!port.ok()) {
      (void)Finish(rt, control::FAILED, std::string(port.status().message()));
      return;
    }
    Place(rt, std::move(swap.nodes), workers, s.idle, taken, job.plan(),
          *port, std::move(swap.swaps));
    return;
  }
  const NodeCount n = CountNodes(job, s, options_.limits.max_nodes);
  if (n.take == 0) {
    WaitForWorkers(
        rt, registry,
        absl::StrCat("needs ", n.want, " idle workers (at least ", n.min_nodes,
                     " on restart) but has ", s.idle.size(), " idle of ",
                     registry.AliveCount(), " alive after ",
                     WaitMs(job) / 1000, " s",
                     s.too_small.ok()
                         ? std::string()
                         : absl::StrCat(" (", s.too_small_alive, " too small: ",
                                        s.too_small.message(), ")")));
    return;
  }
  std::vector<control::WorkerInfo> nodes(s.idle.begin(),
                                         s.idle.begin() + n.take);
  const int per_node = RanksPerNode(job.spec(), nodes[0].probe());
  const int64_t world = static_cast<int64_t>(per_node) * n.take;
  if (world > options_.limits.max_ranks) {
    (void)Finish(rt, control::FAILED,
                 absl::StrCat("attempt ", job.attempt(), " would have ", world,
                              " ranks on ", n.take,
                              " nodes; this coordinator allows at most ",
                              options_.limits.max_ranks,
                              " (strata-coordinator --max-ranks)"));
    return;
  }
  rt.planned_scale = calibrator_.StoredScale(CalibrationKey(nodes));
  // MASTER_PORT: rank 0 runs on a worker host; for `strata run`, Slurm's
  // first node and tests that is this host (documented limitation).
  auto port = net::PickFreePort();
  if (!port.ok()) {
    (void)Finish(rt, control::FAILED, std::string(port.status().message()));
    return;
  }
  Place(rt, std::move(nodes), workers, s.idle, taken, std::nullopt, *port,
        {});
}

void JobManager::Place(
    JobRuntime& rt, std::vector<control::WorkerInfo> nodes,
    const control::ListWorkersReply& workers,
    const std::vector<control::WorkerInfo>& idle,
    const std::set<std::string>& taken, std::optional<Plan> plan, int port,
    std::vector<std::pair<std::string, std::string>> swaps) {
  std::vector<std::string> ids;
  for (const auto& w : nodes) ids.push_back(w.worker_id());
  PlacementSnapshot in;
  in.spares = ReserveSpares(rt.info, workers, idle, ids, taken);
  in.job = LightCopy(rt.info);
  in.per_node = RanksPerNode(rt.info.spec(), nodes[0].probe());
  in.nodes = std::move(nodes);
  in.plan = std::move(plan);
  in.node_speed = rt.info.node_speed();
  in.compute_scale = rt.planned_scale;
  in.port = port;
  in.now_ms = clock_->NowMs();
  in.swaps = std::move(swaps);
  // Small placements take microseconds: done in this step, not a tick later.
  if (static_cast<int>(in.nodes.size()) < options_.async_placement_nodes) {
    Launch(rt, in, ComputePlacement(in));
    return;
  }
  if (placer_ == nullptr) placer_ = std::make_unique<PlacementWorker>();
  rt.placing = placer_->Start(std::move(in));
}

void JobManager::ApplyPlacement(JobRuntime& rt,
                                const WorkerRegistry& registry) {
  std::shared_ptr<PlacementTask> task = std::move(rt.placing);
  rt.placing = nullptr;
  // The registry may have changed while the placement was computed: every
  // node must still be alive, holding nothing and not given to another job,
  // and every spare alive and not taken. Otherwise the result is dropped
  // and the attempt placed again from a new snapshot on the next tick.
  const std::set<std::string> taken = TakenByOthers(rt.info.job_id());
  auto usable = [&](const std::string& id, bool node) {
    const control::WorkerInfo* w = registry.Find(id);
    return w != nullptr && w->alive() && !taken.contains(id) &&
           (!node || w->holds_size() == 0);
  };
  std::string gone;
  for (const auto& w : task->in.nodes) {
    if (!usable(w.worker_id(), true)) gone = w.worker_id();
  }
  for (const auto& id : task->in.spares) {
    if (!usable(id, false)) gone = id;
  }
  if (!gone.empty()) {
    logger_->info("{}: worker {} changed while attempt {} was placed; placing "
                  "it again",
                  rt.info.job_id(), gone, rt.info.attempt());
    return;
  }
  Launch(rt, task->in, std::move(task->out));
}

void JobManager::KeepSpares(JobRuntime& rt, const WorkerRegistry& registry) {
  const control::JobInfo& job = rt.info;
  if (job.spec().launch().spares() <= 0 && job.spare_workers_size() == 0) {
    return;
  }
  const std::set<std::string> taken = TakenByOthers(job.job_id());
  const control::ListWorkersReply workers = registry.List();
  WorkerSurvey s = Survey(job, workers, taken, options_.limits);
  const std::vector<std::string> nodes(job.nodes().begin(), job.nodes().end());
  std::vector<std::string> spares =
      ReserveSpares(job, workers, s.idle, nodes, taken);
  if (std::equal(spares.begin(), spares.end(), job.spare_workers().begin(),
                 job.spare_workers().end())) {
    return;
  }
  control::JobInfo next = job;
  next.clear_spare_workers();
  for (const auto& id : spares) next.add_spare_workers(id);
  const std::string was = absl::StrJoin(job.spare_workers(), ",");
  if (!Commit(rt, std::move(next)).ok()) return;  // retried next tick
  events_->Record(job.job_id(), job.attempt(), "spares",
                  absl::StrCat(spares.size(), " of ",
                               job.spec().launch().spares(),
                               " spare(s) reserved [",
                               absl::StrJoin(spares, ","), "] (was [", was,
                               "])"));
}

void JobManager::WaitForWorkers(JobRuntime& rt, const WorkerRegistry& registry,
                                const std::string& shortage) {
  // Not while workers may still be re-registering after a restart or a
  // pause of the coordinator. Waited on the steady clock from the first
  // look at this attempt (a wall-clock jump must not fail it); a restarted
  // coordinator starts the wait again, as workers need time to return.
  const int64_t steady = clock_->SteadyNowMs();
  if (!rt.pending_since || rt.pending_since->first != rt.info.attempt()) {
    rt.pending_since = std::pair{rt.info.attempt(), steady};
  }
  if (!registry.Settling() &&
      steady - rt.pending_since->second > WaitMs(rt.info)) {
    (void)Finish(rt, control::FAILED, shortage);
  }
}

void JobManager::Launch(JobRuntime& rt, const PlacementSnapshot& in,
                        PlacedAttempt placed) {
  const int take = static_cast<int>(in.nodes.size());
  if (!placed.status.ok()) {
    (void)Finish(rt, control::FAILED,
                 absl::StrCat("planning attempt ", rt.info.attempt(), " on ",
                              take, " nodes: ", placed.status.message()));
    return;
  }
  const bool replanned = Replanned(rt.info, placed.record.plan(), take);
  const std::string was = Layout(rt.info.plan(), rt.info.nodes_size());
  // The record was serialised with the placement: one store write here,
  // then the record and its index are moved in (Commit's contract: stored
  // first, then applied).
  if (!store_->Put(absl::StrCat("job/", placed.record.job_id()), placed.bytes)
           .ok()) {
    return;  // still PENDING; retried
  }
  rt.info = std::move(placed.record);
  rt.index = std::move(placed.index);
  const control::JobInfo& job = rt.info;
  const Plan& plan = job.plan();
  const auto& swaps = in.swaps;
  std::vector<std::string> names;
  for (const auto& w : job.node_info()) names.push_back(w.node_name());
  for (const auto& [lost, spare] : swaps) {
    events_->Record(job.job_id(), job.attempt(), "spare_used",
                    absl::StrCat("node ", lost, " replaced by spare ", spare,
                                 ": same plan, tp=", plan.tp(), " pp=",
                                 plan.pp(), " dp=", plan.dp(), " on ", take,
                                 " nodes"));
  }
  events_->Record(job.job_id(), job.attempt(), "launched",
                  absl::StrCat(plan.placement().ranks_size(), " ranks on ",
                               take, " nodes [", absl::StrJoin(names, ", "),
                               "]: tp=", plan.tp(), " pp=", plan.pp(), " dp=",
                               plan.dp(), " cp=", std::max(1, plan.cp())));
  const int want = job.spec().launch().spares();
  const auto& spares = job.spare_workers();
  if (want > 0) {
    events_->Record(
        job.job_id(), job.attempt(),
        static_cast<int>(spares.size()) < want ? "spares_short" : "spares",
        absl::StrCat(spares.size(), " of ", want, " spare(s) reserved [",
                     absl::StrJoin(spares, ","), "]",
                     static_cast<int>(spares.size()) < want
                         ? "; started without the rest, reserved when "
                           "workers become idle"
                         : ""));
  }
  if (replanned) {
    events_->Record(job.job_id(), job.attempt(), "replanned",
                    ReplannedText(job, plan, take, was));
  }
}

}  // namespace strata::coordinator
