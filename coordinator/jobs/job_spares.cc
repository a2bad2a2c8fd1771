#include "coordinator/jobs/job_spares.h"

#include <algorithm>
#include <map>

#include "coordinator/jobs/attempt_plan.h"

namespace strata::coordinator {

namespace {

bool Evicted(const control::JobInfo& job, const std::string& node_name) {
  const auto& e = job.evicted_nodes();
  return std::find(e.begin(), e.end(), node_name) != e.end();
}

const control::WorkerInfo* FindWorker(const control::ListWorkersReply& workers,
                                      const std::string& id) {
  for (const auto& w : workers.workers()) {
    if (w.worker_id() == id) return &w;
  }
  return nullptr;
}

}  // namespace

SpareSwap PlanSpareSwap(const control::JobInfo& job,
                        const control::ListWorkersReply& workers,
                        const std::vector<control::WorkerInfo>& idle,
                        const std::set<std::string>& taken) {
  SpareSwap out;
  if (job.attempt() == 0 || job.node_info_size() == 0 || !job.has_plan() ||
      !job.node_speed().empty()) {
    return out;
  }
  std::map<std::string, const control::WorkerInfo*> idle_by_id;
  for (const auto& w : idle) idle_by_id[w.worker_id()] = &w;
  std::set<std::string> previous;
  for (const auto& n : job.node_info()) previous.insert(n.worker_id());
  // Keep, wait for, or open a hole at each previous node.
  std::vector<int> holes;
  out.nodes.resize(job.node_info_size());
  for (int i = 0; i < job.node_info_size(); ++i) {
    const control::WorkerInfo& was = job.node_info(i);
    if (auto it = idle_by_id.find(was.worker_id()); it != idle_by_id.end()) {
      out.nodes[i] = *it->second;
      continue;
    }
    const control::WorkerInfo* now = FindWorker(workers, was.worker_id());
    const bool draining = now != nullptr && now->alive() &&
                          !Evicted(job, was.node_name()) &&
                          !taken.contains(was.worker_id()) &&
                          now->holds_size() > 0;
    if (draining) {
      out.kind = SpareSwap::Kind::kWait;
      return out;
    }
    holes.push_back(i);
  }
  // Candidates: the job's reserved spares first, then any other idle worker
  // that is not one of the previous nodes.
  std::vector<const control::WorkerInfo*> candidates;
  std::set<std::string> listed;
  for (const auto& id : job.spare_workers()) {
    auto it = idle_by_id.find(id);
    if (it != idle_by_id.end() && !previous.contains(id) &&
        listed.insert(id).second) {
      candidates.push_back(it->second);
    }
  }
  for (const auto& w : idle) {
    if (!previous.contains(w.worker_id()) &&
        listed.insert(w.worker_id()).second) {
      candidates.push_back(&w);
    }
  }
  size_t next = 0;
  for (int i : holes) {
    const control::WorkerInfo& was = job.node_info(i);
    const int want = RanksPerNode(job.spec(), was.probe());
    // A spare must run the same number of ranks, or the plan would not fit.
    while (next < candidates.size() &&
           RanksPerNode(job.spec(), candidates[next]->probe()) != want) {
      ++next;
    }
    if (next == candidates.size()) return SpareSwap{};  // re-plan instead
    out.nodes[i] = *candidates[next++];
    out.swaps.emplace_back(was.node_name(), out.nodes[i].node_name());
  }
  out.kind = SpareSwap::Kind::kReady;
  return out;
}

std::vector<control::WorkerInfo> PickInPlaceSpares(
    const control::JobInfo& job, const control::ListWorkersReply& workers,
    const std::set<std::string>& taken, const std::vector<int>& lost,
    const std::function<bool(const control::WorkerInfo&)>& fits) {
  std::set<std::string> nodes(job.nodes().begin(), job.nodes().end());
  auto usable = [&](const control::WorkerInfo& w) {
    return w.alive() && w.holds_size() == 0 && !nodes.contains(w.worker_id()) &&
           !taken.contains(w.worker_id()) && !Evicted(job, w.node_name()) &&
           fits(w);
  };
  // Reserved spares in reservation order, then the other idle workers in
  // registry order.
  std::vector<const control::WorkerInfo*> candidates;
  for (const auto& id : job.spare_workers()) {
    const control::WorkerInfo* w = FindWorker(workers, id);
    if (w != nullptr && usable(*w)) candidates.push_back(w);
  }
  for (const auto& w : workers.workers()) {
    const auto& spares = job.spare_workers();
    if (usable(w) && std::find(spares.begin(), spares.end(), w.worker_id()) ==
                         spares.end()) {
      candidates.push_back(&w);
    }
  }
  std::vector<control::WorkerInfo> out;
  std::vector<bool> used(candidates.size(), false);
  for (int node : lost) {
    if (node < 0 || node >= job.node_info_size()) return {};
    const int want = RanksPerNode(job.spec(), job.node_info(node).probe());
    bool found = false;
    for (size_t i = 0; i < candidates.size() && !found; ++i) {
      if (used[i] || RanksPerNode(job.spec(), candidates[i]->probe()) != want)
        continue;
      used[i] = found = true;
      out.push_back(*candidates[i]);
    }
    if (!found) return {};
  }
  return out;
}

std::vector<std::string> ReserveSpares(
    const control::JobInfo& job, const control::ListWorkersReply& workers,
    const std::vector<control::WorkerInfo>& idle,
    const std::vector<std::string>& nodes, const std::set<std::string>& taken) {
  const size_t want =
      static_cast<size_t>(std::max(0, job.spec().launch().spares()));
  std::set<std::string> used(nodes.begin(), nodes.end());
  std::vector<std::string> out;
  for (const auto& id : job.spare_workers()) {
    const control::WorkerInfo* w = FindWorker(workers, id);
    if (out.size() < want && w != nullptr && w->alive() &&
        !used.contains(id) && !taken.contains(id) &&
        !Evicted(job, w->node_name())) {
      out.push_back(id);
      used.insert(id);
    }
  }
  for (const auto& w : idle) {
    if (out.size() >= want) break;
    if (used.contains(w.worker_id()) || taken.contains(w.worker_id())) continue;
    out.push_back(w.worker_id());
    used.insert(w.worker_id());
  }
  return out;
}

void AddTaken(const control::JobInfo& other, std::set<std::string>* taken) {
  if (other.state() == control::RUNNING) {
    for (const auto& n : other.node_info()) taken->insert(n.worker_id());
  }
  for (const auto& id : other.spare_workers()) taken->insert(id);
}

}  // namespace strata::coordinator
