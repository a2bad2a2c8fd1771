// Coordinator request handlers, independent of the transport: Handle() maps a
// decoded Request to a Reply. The ZeroMQ server (server/router_server.h) and
// unit tests both call it. Event-loop thread only; not thread-safe.
#pragma once

#include <cstdint>
#include <map>
#include <string>

#include "coordinator/protocol/clock.h"
#include "coordinator/registry/worker_registry.h"
#include "proto/control.pb.h"

namespace strata::coordinator {

class Service {
 public:
  Service(const Clock* clock, RegistryOptions options);

  // Never fails: errors are reported in reply.status.
  control::Reply Handle(const control::Request& request);

  // Periodic work (liveness); call from the event loop.
  void Tick();

  WorkerRegistry& registry() { return registry_; }

 private:
  WorkerRegistry registry_;
  // Rendezvous KV (in memory for now; see docs/control-plane.md).
  std::map<std::string, std::string> kv_;
};

}  // namespace strata::coordinator
