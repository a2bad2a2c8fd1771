// Tracks registered workers (docs/architecture.md); whether each is alive is
// fault::Liveness's judgement (fault/liveness.h): a worker that has not
// heartbeated for `lost_after_ms` is marked lost by CheckLiveness(), with a
// full window after the registry's creation (a coordinator restart) and
// after GraceAfterPause(). Runs on the coordinator event loop thread only;
// not thread-safe.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "common/clock.h"
#include "common/status.h"
#include "fault/liveness.h"
#include "observe/metrics.h"
#include "proto/control.pb.h"

namespace strata::coordinator {

struct RegistryOptions {
  int64_t heartbeat_interval_ms = 1000;  // told to workers at registration
  int64_t lost_after_ms = 3000;          // 3 missed intervals
};

class WorkerRegistry {
 public:
  // `clock` must outlive the registry.
  WorkerRegistry(const Clock* clock, RegistryOptions options);

  // Registers (or re-adopts, by node name) a worker. The node name must
  // pass control::ValidateNodeName (InvalidArgument). A node whose record
  // is alive with another incarnation is refused (AlreadyExists, logged):
  // one live worker per node. Returns the worker id ("w-<node_name>").
  StatusOr<control::RegisterWorkerReply> Register(
      const control::RegisterWorkerRequest& request);

  // Records a heartbeat. Unknown ids get reregister=true (coordinator
  // restarted); a lost worker that heartbeats again is revived.
  control::HeartbeatReply Heartbeat(const control::HeartbeatRequest& request);

  // Marks workers silent for longer than lost_after_ms (counted from their
  // last heartbeat or the last pause, whichever is later) as lost and
  // returns the ids newly lost by this call.
  std::vector<std::string> CheckLiveness();

  // The coordinator did not run for a while (SIGSTOP, swapped out, a stalled
  // disk): heartbeats may be waiting unread. Starts every worker's liveness
  // window afresh now.
  void GraceAfterPause();
  // True within lost_after_ms of the registry's creation or of the last
  // GraceAfterPause(): workers may not have been able to report yet.
  bool Settling() const;

  // Records which attempts ("<job>/<attempt>") the worker still holds.
  void SetHolds(
      const std::string& worker_id,
      const google::protobuf::RepeatedPtrField<control::RankReport>& ranks);
  // nullptr if unknown.
  const control::WorkerInfo* Find(const std::string& worker_id) const;

  // Every worker; without `probes`, each without its NodeProbe (what
  // /metrics needs, a tenth of the bytes to copy).
  control::ListWorkersReply List(bool probes = true) const;
  int AliveCount() const;
  // Heartbeat round trips as the workers measured them (seconds,
  // observe::SecondsBuckets()).
  const observe::HistogramCounts& HeartbeatRtt() const { return rtt_; }

 private:
  const Clock* clock_;
  RegistryOptions options_;
  std::map<std::string, control::WorkerInfo> workers_;  // by worker id
  // Keys are those of workers_: the incarnation that registered last.
  std::map<std::string, std::string> incarnation_;
  fault::Liveness liveness_;                            // by worker id
  observe::HistogramCounts rtt_;
};

}  // namespace strata::coordinator
