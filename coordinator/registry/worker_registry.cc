#include "coordinator/registry/worker_registry.h"

#include <algorithm>
#include <set>

#include "absl/strings/str_cat.h"
#include "common/logging.h"
#include "common/net.h"
#include "control/curve_keys.h"

namespace strata::coordinator {

WorkerRegistry::WorkerRegistry(const Clock* clock, RegistryOptions options)
    : clock_(clock),
      options_(options),
      liveness_(*clock, options.lost_after_ms) {}

StatusOr<control::RegisterWorkerReply> WorkerRegistry::Register(
    const control::RegisterWorkerRequest& request) {
  if (request.node_name().empty()) {
    return absl::InvalidArgumentError("RegisterWorker: node_name is empty");
  }
  if (Status s = control::ValidateNodeName(request.node_name()); !s.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("RegisterWorker: ", s.message()));
  }
  std::string id = absl::StrCat("w-", request.node_name());
  if (auto live = workers_.find(id);
      live != workers_.end() && live->second.alive() &&
      incarnation_[id] != request.incarnation()) {
    // Another process claims a node whose worker is alive: refused, so it
    // cannot take over the node's launch orders (docs/security.md). The
    // worker retries (AlreadyExists is not fatal to it) and gets in once
    // the old one is declared lost.
    const std::string why = absl::StrCat(
        "RegisterWorker: node '", request.node_name(), "' already has a live "
        "worker (", id, ", last heartbeat ",
        clock_->NowMs() - live->second.last_heartbeat_unix_ms(),
        " ms ago) with another incarnation; a second registration is refused "
        "until it is lost");
    GetLogger("CTRL")->warn("{}", why);
    return absl::AlreadyExistsError(why);
  }
  incarnation_[id] = request.incarnation();
  control::WorkerInfo& info = workers_[id];
  info.set_worker_id(id);
  info.set_node_name(request.node_name());
  *info.mutable_probe() = request.probe();
  info.set_address(request.address().empty() ? request.probe().hostname()
                                             : request.address());
  // The memory tier's replica server (docs/checkpoint.md "Memory tier"):
  // kept only when it is HOST:PORT, so a launch never carries garbage.
  info.clear_replica_endpoint();
  if (!request.replica_endpoint().empty()) {
    if (net::ParseHostPort(request.replica_endpoint()).ok()) {
      info.set_replica_endpoint(request.replica_endpoint());
    } else {
      GetLogger("CTRL")->warn(
          "RegisterWorker {}: replica endpoint '{}' is not HOST:PORT; "
          "ignored (no memory tier on this node)",
          request.node_name(), request.replica_endpoint());
    }
  }
  SetHolds(id, request.ranks());
  info.set_alive(true);
  info.set_last_heartbeat_unix_ms(clock_->NowMs());
  liveness_.Beat(id);
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
  if (request.has_clock()) *it->second.mutable_clock() = request.clock();
  if (request.last_rtt_us() > 0) {
    rtt_.Add(observe::SecondsBuckets(), request.last_rtt_us() / 1e6);
  }
  liveness_.Beat(it->first);
  return reply;
}

std::vector<std::string> WorkerRegistry::CheckLiveness() {
  std::vector<std::string> lost = liveness_.Check();
  for (const std::string& id : lost) workers_.at(id).set_alive(false);
  return lost;
}

void WorkerRegistry::GraceAfterPause() { liveness_.GraceAfterPause(); }

bool WorkerRegistry::Settling() const { return liveness_.Settling(); }

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

control::ListWorkersReply WorkerRegistry::List(bool probes) const {
  control::ListWorkersReply reply;
  reply.mutable_workers()->Reserve(static_cast<int>(workers_.size()));
  for (const auto& [id, info] : workers_) {
    control::WorkerInfo* w = reply.add_workers();
    if (probes) {
      *w = info;
      continue;
    }
    w->set_worker_id(info.worker_id());
    w->set_node_name(info.node_name());
    w->set_alive(info.alive());
    w->set_last_heartbeat_unix_ms(info.last_heartbeat_unix_ms());
    w->set_address(info.address());
    *w->mutable_holds() = info.holds();
    if (info.has_clock()) *w->mutable_clock() = info.clock();
  }
  return reply;
}

int WorkerRegistry::AliveCount() const {
  int n = 0;
  for (const auto& [id, info] : workers_) n += info.alive() ? 1 : 0;
  return n;
}

}  // namespace strata::coordinator
