// Coordinator request handlers, independent of the transport: Handle() maps a
// decoded Request to a Reply. The ZeroMQ server (server/router_server.h) and
// unit tests both call it. Event-loop thread only; not thread-safe.
#pragma once

#include <cstdint>
#include <string>

#include "common/clock.h"
#include "common/log_limiter.h"
#include "coordinator/jobs/event_log.h"
#include "coordinator/jobs/job_manager.h"
#include "coordinator/kv/kv_store.h"
#include "coordinator/registry/worker_registry.h"
#include "coordinator/security/access_policy.h"
#include "coordinator/security/identity.h"
#include "proto/control.pb.h"

namespace strata::coordinator {

// The coordinator's state services; any may be null (their requests then
// fail with Unimplemented). Non-null ones must outlive the Service.
struct Services {
  JobManager* jobs = nullptr;
  KvStore* kv = nullptr;
  EventLog* events = nullptr;
  LogStore* logs = nullptr;
  // Resumed from Tick() when unwritable; its health is put in list replies.
  StateStore* store = nullptr;
};

class Service {
 public:
  Service(const Clock* clock, RegistryOptions options, Services services = {});

  // Never fails: errors are reported in reply.status. `who` is the
  // authenticated sender (RouterServer; plaintext: an admin). Requests its
  // role does not allow (security/access_policy.h) are answered
  // PermissionDenied, logged (rate-limited per sender) and counted
  // (denied()); a worker's reports about ranks not placed on it are dropped
  // and logged the same way.
  control::Reply Handle(const control::Request& request,
                        const Identity& who = PlaintextIdentity());
  // Requests refused by the access policy, and reports dropped, so far.
  uint64_t denied() const { return denied_; }
  uint64_t dropped_reports() const { return dropped_reports_; }

  // Periodic work (store recovery, liveness, placement, restarts); call
  // from the event loop.
  void Tick();

  // The state store's health (writable when there is no store).
  control::CoordinatorHealth Health() const;

  // The event loop reports the time since its previous tick before each
  // Tick(). A gap longer than the heartbeat interval means the coordinator
  // itself did not run (SIGSTOP, swapped out, a stalled disk) and heartbeats
  // may be waiting unread: every worker gets a fresh liveness window
  // (WorkerRegistry::GraceAfterPause) instead of being declared lost, and
  // the pause is logged and recorded as a "coordinator_paused" event.
  void NoteLoopGap(int64_t gap_ms);

  WorkerRegistry& registry() { return registry_; }
  // The clock the handlers read (and the event loop paces Tick() with).
  const Clock* clock() const { return clock_; }

 private:
  StatusOr<control::Reply> HandleBody(const control::Request& request,
                                      const Identity& who);
  StatusOr<control::Reply> HandleHeartbeat(const control::Request& request);
  // Drops the heartbeat's reports about ranks not placed on its worker.
  const control::HeartbeatRequest& PlacedOnly(
      const control::HeartbeatRequest& hb, control::HeartbeatRequest* copy);
  StatusOr<control::Reply> HandleKv(const control::Request& request);
  StatusOr<control::Reply> HandleJob(const control::Request& request);

  const Clock* clock_;
  const RegistryOptions options_;
  WorkerRegistry registry_;
  Services s_;
  int64_t synced_generation_ = 0;  // store generation memory was written to
  LogLimiter limiter_;             // refusals, per sender
  uint64_t denied_ = 0;
  uint64_t dropped_reports_ = 0;
};

}  // namespace strata::coordinator
