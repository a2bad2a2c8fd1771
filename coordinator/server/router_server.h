// ZeroMQ transport for the coordinator: a ROUTER socket that decodes each
// frame, passes valid requests to Service::Handle and sends the reply back to
// the sending DEALER. Bad frames (oversized, truncated, malformed, wrong
// protocol version, wrong frame count) are logged with the reason, counted in
// rejects(), answered with an InvalidArgument reply when addressable, and
// never crash the loop. Owns its socket; run on one thread.
#pragma once

#include <atomic>
#include <memory>
#include <string>
#include <zmq.hpp>

#include "common/logging.h"
#include "common/status.h"
#include "coordinator/protocol/clock.h"
#include "coordinator/protocol/codec.h"
#include "coordinator/server/service.h"

namespace strata::coordinator {

class RouterServer {
 public:
  // `service` and `context` must outlive the server.
  RouterServer(zmq::context_t* context, Service* service, Logger logger);

  // Binds `endpoint` (tcp://host:port, ipc://path). Returns the endpoint
  // actually bound (resolves tcp port 0 / "*").
  StatusOr<std::string> Bind(const std::string& endpoint);

  // Handles messages until `stop` is set; calls Service::Tick() at least
  // every `tick_ms`.
  void Run(const std::atomic<bool>& stop, int tick_ms = 100);

  // Handles at most one pending message, waiting up to `timeout_ms`.
  // Returns true if a message was consumed.
  bool PollOnce(int timeout_ms);

  const RejectCounters& rejects() const { return rejects_; }
  uint64_t handled() const { return handled_; }

 private:
  zmq::socket_t socket_;
  Service* service_;
  Logger logger_;
  RejectCounters rejects_;
  uint64_t handled_ = 0;
};

}  // namespace strata::coordinator
