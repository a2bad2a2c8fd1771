// Client side of the control protocol: a DEALER socket that sends one
// Request and waits for the Reply with the same request id (stale replies
// from timed-out calls are discarded). Used by workers and the CLI.
// Not thread-safe: one caller thread per client. The timeout is real time
// (a poll(2) deadline on the steady clock), not an injected Clock: it is the
// I/O wait itself, and callers that make timing decisions do so with their
// own Clock around Call().
//
// With a CurveClientConfig the socket is a CURVE client (RFC 26) of the
// server key it names. A server that refuses the key (ZAP 400, RFC 27) never
// answers: calls end in DeadlineExceeded, as for an unreachable server.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <zmq.hpp>

#include "common/status.h"
#include "control/client.h"
#include "control/curve_config.h"
#include "proto/control.pb.h"

namespace strata::control {

class DealerClient : public Client {
 public:
  // `context` must outlive the client. Connects lazily (ZeroMQ reconnects).
  // `curve` must hold valid Z85 keys (as loaded by LoadCurveClientConfig);
  // invalid ones are a programming error and abort.
  DealerClient(zmq::context_t* context, const std::string& endpoint,
               const std::optional<CurveClientConfig>& curve = std::nullopt);

  // Client::Call; fills in the protocol version and request id. OutOfRange,
  // without sending, when the encoded request exceeds kMaxFrameBytes.
  StatusOr<control::Reply> Call(control::Request request,
                                int timeout_ms) override;

 private:
  zmq::socket_t socket_;
  uint64_t next_id_ = 1;
};

}  // namespace strata::control
