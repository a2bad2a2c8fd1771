// Coordinator request handlers, independent of the transport: Handle() maps a
// decoded Request to a Reply. The ZeroMQ server (server/router_server.h) and
// unit tests both call it. Event-loop thread only; not thread-safe.
#pragma once

#include <cstdint>
#include <map>
#include <string>

#include "coordinator/jobs/job_manager.h"
#include "coordinator/protocol/clock.h"
#include "coordinator/registry/worker_registry.h"
#include "proto/control.pb.h"

namespace strata::coordinator {

class Service {
 public:
  // `jobs` may be null (job requests then fail with Unimplemented); it must
  // outlive the service otherwise.
  Service(const Clock* clock, RegistryOptions options,
          JobManager* jobs = nullptr);

  // Never fails: errors are reported in reply.status.
  control::Reply Handle(const control::Request& request);

  // Periodic work (liveness); call from the event loop.
  void Tick();

  WorkerRegistry& registry() { return registry_; }

 private:
  control::Reply HandleJob(const control::Request& request);

  WorkerRegistry registry_;
  JobManager* jobs_;
  // Rendezvous KV (in memory for now; see docs/control-plane.md).
  std::map<std::string, std::string> kv_;
};

}  // namespace strata::coordinator
