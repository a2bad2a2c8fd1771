#include "coordinator/registry/worker_registry.h"

#include <algorithm>
#include <set>

#include "absl/strings/str_cat.h"

namespace strata::coordinator {

WorkerRegistry::WorkerRegistry(const Clock* clock, RegistryOptions options)
    : clock_(clock), options_(options), grace_from_ms_(clock->SteadyNowMs()) {}

StatusOr<control::RegisterWorkerReply> WorkerRegistry::Register(
    const control::RegisterWorkerRequest& request) {
  if (request.node_name().empty()) {
    return absl::InvalidArgumentError("RegisterWorker: node_name is empty");
  }
  std::string id = absl::StrCat("w-", request.node_name());
  control::WorkerInfo& info = workers_[id];
  info.set_worker_id(id);
  info.set_node_name(request.node_name());
  *info.mutable_probe() = request.probe();
  info.set_address(request.address().empty() ? request.probe().hostname()
                                             : request.address());
  SetHolds(id, request.ranks());
  info.set_alive(true);
  info.set_last_heartbeat_unix_ms(clock_->NowMs());
  last_seen_ms_[id] = clock_->SteadyNowMs();
  control::RegisterWorkerReply reply;
  reply.set_worker_id(id);
  reply.set_heartbeat_interval_ms(options_.heartbeat_interval_ms);
  return reply;
}

control::HeartbeatReply WorkerRegistry::Heartbeat(
    const control::HeartbeatRequest& request) {
  control::HeartbeatReply reply;
  auto it = workers_.find(request.worker_id());
  if (it == workers_.end()) {
    reply.set_reregister(true);
    return reply;
  }
  it->second.set_alive(true);
  it->second.set_last_heartbeat_unix_ms(clock_->NowMs());
  last_seen_ms_[it->first] = clock_->SteadyNowMs();
  return reply;
}

std::vector<std::string> WorkerRegistry::CheckLiveness() {
  std::vector<std::string> lost;
  const int64_t now = clock_->SteadyNowMs();
  for (auto& [id, info] : workers_) {
    const int64_t since = std::max(last_seen_ms_[id], grace_from_ms_);
    if (info.alive() && now - since > options_.lost_after_ms) {
      info.set_alive(false);
      lost.push_back(id);
    }
  }
  return lost;
}

void WorkerRegistry::GraceAfterPause() {
  grace_from_ms_ = clock_->SteadyNowMs();
}

bool WorkerRegistry::Settling() const {
  return clock_->SteadyNowMs() - grace_from_ms_ <= options_.lost_after_ms;
}

void WorkerRegistry::SetHolds(
    const std::string& worker_id,
    const google::protobuf::RepeatedPtrField<control::RankReport>& ranks) {
  auto it = workers_.find(worker_id);
  if (it == workers_.end()) return;
  std::set<std::string> holds;
  for (const auto& r : ranks) {
    holds.insert(absl::StrCat(r.job_id(), "/", r.attempt()));
  }
  it->second.clear_holds();
  for (const auto& h : holds) it->second.add_holds(h);
}

const control::WorkerInfo* WorkerRegistry::Find(
    const std::string& worker_id) const {
  auto it = workers_.find(worker_id);
  return it == workers_.end() ? nullptr : &it->second;
}

control::ListWorkersReply WorkerRegistry::List() const {
  control::ListWorkersReply reply;
  for (const auto& [id, info] : workers_) *reply.add_workers() = info;
  return reply;
}

int WorkerRegistry::AliveCount() const {
  int n = 0;
  for (const auto& [id, info] : workers_) n += info.alive() ? 1 : 0;
  return n;
}

}  // namespace strata::coordinator
