// Counts and logs failed ZMTP handshakes on a CURVE server socket that never
// reach the ZAP handler: plaintext (NULL mechanism) clients, clients using
// the wrong server public key (their CURVE HELLO box does not open, RFC 26),
// garbage on the port. libzmq reports them as socket monitor events
// ZMQ_EVENT_HANDSHAKE_FAILED_PROTOCOL / _NO_DETAIL; ZAP denials arrive as
// _HANDSHAKE_FAILED_AUTH and are skipped here (ZapHandler counts them).
// Logged at warn through a LogLimiter (common/log_limiter.h) keyed by
// (endpoint, reason).
//
// Runs on the server's event-loop thread: Drain() reads pending events
// without blocking. Must be destroyed before the monitored socket.
#pragma once

#include <cstdint>
#include <string>
#include <zmq.hpp>

#include "common/log_limiter.h"
#include "common/logging.h"
#include "common/status.h"

namespace strata::coordinator {

class HandshakeMonitor {
 public:
  // `context` and `socket` must outlive the monitor.
  HandshakeMonitor(zmq::context_t* context, zmq::socket_t* socket,
                   Logger logger);
  ~HandshakeMonitor();
  HandshakeMonitor(const HandshakeMonitor&) = delete;
  HandshakeMonitor& operator=(const HandshakeMonitor&) = delete;

  // Starts monitoring (zmq_socket_monitor to a unique inproc endpoint).
  Status Start();

  // Reads every pending event; returns how many were handshake failures.
  uint64_t Drain();

  // For polling together with the server socket; null before Start().
  void* handle() { return started_ ? pair_.handle() : nullptr; }
  uint64_t failures() const { return failures_; }

 private:
  zmq::context_t* context_;
  zmq::socket_t* socket_;
  zmq::socket_t pair_;
  Logger logger_;
  LogLimiter limiter_;
  bool started_ = false;
  uint64_t failures_ = 0;
};

}  // namespace strata::coordinator
