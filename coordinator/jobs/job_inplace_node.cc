// JobManager's in-place replacement of a lost node (docs/fault.md "Node
// loss in place"): when a worker of a running attempt whose ranks all opted
// in to in-place restart is lost and an idle worker can take its place
// (job_spares.h PickInPlaceSpares), the attempt is kept. The record puts
// the spare at the lost node's index (same plan, same node index, so the
// ranks' layout and the memory tier's buddies are unchanged), the
// coordinator announces a new generation, and the spare's worker starts
// the node's ranks with it (replace orders, job_inplace.cc) while the
// survivors abort their collectives and re-form with them. Before the
// generation it writes, in the generation's namespace, the ranks it
// replaces (a rank of the lost node that is still alive, a worker declared
// lost while only slow, must not rejoin: runtime/in_place.cc) and the
// memory tier's replica endpoints with the spare's (the survivors' next
// checkpointer replicates to it). No spare, a replacement under way, or a
// program that did not opt in: the attempt is restarted as before.
#include <algorithm>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "coordinator/jobs/attempt_plan.h"
#include "coordinator/jobs/job_manager.h"
#include "coordinator/jobs/job_spares.h"

namespace strata::coordinator {

bool JobManager::ReplaceNodesInPlace(JobRuntime& rt,
                                     const WorkerRegistry& registry,
                                     const std::vector<int>& lost) {
  const control::JobInfo& job = rt.info;
  std::vector<std::string> lost_names;
  for (int n : lost) {
    if (n < 0 || n >= job.node_info_size()) return false;
    lost_names.push_back(job.node_info(n).node_name());
  }
  const std::string what =
      absl::StrCat("node(s) ", absl::StrJoin(lost_names, ","));
  if (!InPlaceAllowed(rt, what)) return false;
  const std::vector<control::WorkerInfo> spares = PickInPlaceSpares(
      job, registry.List(), TakenByOthers(job.job_id()), lost,
      [&](const control::WorkerInfo& w) {
        return CheckNodeCapacity(RanksPerNode(job.spec(), w.probe()), w,
                                 options_.limits)
            .ok();
      });
  if (spares.empty()) {
    events_->Record(job.job_id(), job.attempt(), "fault_action",
                    absl::StrCat("no in-place restart of ", what,
                                 " (no idle spare): restarting the attempt"));
    return false;
  }
  // The record: each spare at its lost node's index, the node's ranks not
  // started yet, the spares no longer reserved.
  control::JobInfo next = job;
  const AttemptIndex& index = IndexOf(rt);
  std::vector<int> ranks;
  for (size_t i = 0; i < lost.size(); ++i) {
    const int n = lost[i];
    next.set_nodes(n, spares[i].worker_id());
    control::WorkerInfo* info = next.mutable_node_info(n);
    *info = spares[i];
    info->clear_holds();
    for (int r : index.ranks_of_node[n]) {
      ranks.push_back(r);
      control::RankReport fresh;
      fresh.set_job_id(job.job_id());
      fresh.set_attempt(job.attempt());
      fresh.set_rank(r);
      *next.mutable_ranks(r) = fresh;
    }
  }
  next.clear_spare_workers();
  for (const auto& id : job.spare_workers()) {
    if (std::none_of(spares.begin(), spares.end(),
                     [&](const auto& w) { return w.worker_id() == id; })) {
      next.add_spare_workers(id);
    }
  }
  if (ranks.empty() || !Commit(rt, std::move(next)).ok()) return false;
  rt.index = AttemptIndex();  // the nodes changed: rebuilt on the next use
  // In the generation's namespace: the replaced ranks, and the replica
  // endpoints in node order when every node has one.
  std::vector<std::pair<std::string, std::string>> keys = {
      {"inplace/replaced", absl::StrJoin(ranks, ",")}};
  std::vector<std::string> replicas;
  for (const auto& n : rt.info.node_info()) replicas.push_back(n.replica_endpoint());
  if (std::none_of(replicas.begin(), replicas.end(),
                   [](const std::string& e) { return e.empty(); })) {
    keys.emplace_back("inplace/mem_peers", absl::StrJoin(replicas, ","));
  }
  std::vector<std::string> spare_names;
  for (const auto& w : spares) spare_names.push_back(w.node_name());
  const std::string cause =
      absl::StrCat("worker(s) of ", absl::StrJoin(lost_names, ","),
                   " lost (no heartbeat)");
  InPlaceState::Replacement p{.ranks = ranks,
                              .node = absl::StrJoin(spare_names, ","),
                              .cause = cause,
                              .lost_node = absl::StrJoin(lost_names, ",")};
  if (!AnnounceGeneration(rt, std::move(p), keys)) {
    // The record already names the spares: the next attempt starts there.
    (void)FailAttempt(rt, absl::StrCat(cause, "; the KV store refused the "
                                              "in-place generation"));
    return true;
  }
  const Plan& plan = rt.info.plan();
  for (size_t i = 0; i < lost.size(); ++i) {
    events_->Record(job.job_id(), job.attempt(), "spare_used",
                    absl::StrCat("node ", lost_names[i], " replaced by spare ",
                                 spares[i].node_name(),
                                 " in place: generation ",
                                 rt.in_place.generation, ", same plan, tp=",
                                 plan.tp(), " pp=", plan.pp(), " dp=",
                                 plan.dp(), " on ", job.nodes_size(),
                                 " nodes; rank(s) ", absl::StrJoin(ranks, ","),
                                 " start there, the others keep running"));
  }
  logger_->warn("{} attempt {}: {} replaced in place by {} (generation {})",
                job.job_id(), job.attempt(), absl::StrJoin(lost_names, ","),
                absl::StrJoin(spare_names, ","), rt.in_place.generation);
  (void)logs_->Note(job.job_id(),
                    absl::StrCat("[strata] attempt ", job.attempt(), ": ",
                                 cause, ": replaced in place by spare(s) ",
                                 absl::StrJoin(spare_names, ","),
                                 " (generation ", rt.in_place.generation,
                                 ")"));
  return true;
}

}  // namespace strata::coordinator
