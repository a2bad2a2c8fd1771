// ZeroMQ transport for the coordinator: a ROUTER socket that decodes each
// frame, passes valid requests to Service::Handle and sends the reply back to
// the sending DEALER. Bad frames (oversized, truncated, malformed, wrong
// protocol version, wrong frame count) are logged with the reason and the
// peer's address, counted in rejects(), answered with an InvalidArgument
// reply when addressable, and never crash the loop. Every such line is rate-
// limited per peer and kind (common/log_limiter.h): a flood of garbage logs
// a few lines and a "suppressed K similar messages" summary. Owns its
// socket; run on one thread.
//
// With a control::CurveServerConfig the socket is a CURVE server (ZMTP CURVE,
// RFC 26) and only allow-listed client keys get through the ZAP handler (RFC
// 27, security/zap_handler.h); refused connections are counted in
// rejects().unauthenticated. Without one it is plaintext (trusted networks).
#pragma once

#include <atomic>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>
#include <zmq.hpp>

#include "common/clock.h"
#include "common/log_limiter.h"
#include "common/logging.h"
#include "common/status.h"
#include "control/codec.h"
#include "control/curve_config.h"
#include "coordinator/security/handshake_monitor.h"
#include "coordinator/security/zap_handler.h"
#include "coordinator/server/loop_stats.h"
#include "coordinator/server/service.h"

namespace strata::coordinator {

class RouterServer {
 public:
  // The listening socket's accept backlog (router_server.cc).
  static constexpr int kListenBacklog = 4096;
  // `service` and `context` must outlive the server. With `curve`, the
  // server's ZAP handler is bound in `context` by the first Bind(): one CURVE
  // server per context.
  // `ranks` (nullable, must outlive the server): per-attempt rank keys the
  // ZAP handler also admits. Every message is handed to the service with
  // the sender's identity (security/identity.h): under CURVE the one ZAP
  // gave its key, in plaintext PlaintextIdentity().
  RouterServer(zmq::context_t* context, Service* service, Logger logger,
               std::optional<control::CurveServerConfig> curve = std::nullopt,
               const RankKeys* ranks = nullptr);
  ~RouterServer();

  // Binds `endpoint` (tcp://host:port, ipc://path). Returns the endpoint
  // actually bound (resolves tcp port 0 / "*"). With CURVE, first starts the
  // ZAP handler and the handshake monitor (errors are returned).
  StatusOr<std::string> Bind(const std::string& endpoint);

  // Handles messages until `stop` is set; calls Service::Tick() every
  // `tick_ms` on the service's clock (Service::clock()), after telling the
  // service how long the loop took since the last tick (NoteLoopGap), and
  // `on_tick` (if any) after it, on this thread. Logs every pending
  // "suppressed" summary before returning.
  void Run(const std::atomic<bool>& stop, int tick_ms = 100,
           const std::function<void()>& on_tick = nullptr);

  // Handles at most one pending message, waiting up to `timeout_ms`.
  // Returns true if a message was consumed.
  bool PollOnce(int timeout_ms);

  // Counters so far; `unauthenticated` also counts ZAP denials made on the
  // ZAP thread, so it may grow while the loop is idle.
  control::RejectCounters rejects() const;
  uint64_t handled() const { return handled_; }
  // How long each request and each tick held the loop (loop_stats.h); a
  // step over kSlowStepMs of wall time is also logged at warn (rate-limited)
  // with what it was. Read on the loop thread (e.g. from `on_tick`).
  const LoopStats& loop_stats() const { return loop_stats_; }
  static constexpr double kSlowStepMs = 50;
  bool secure() const { return curve_.has_value(); }

 private:
  Status StartSecurity();
  // Waits up to `timeout_ms` for a message (draining the handshake
  // monitor); true if the socket has one.
  bool WaitReadable(int timeout_ms);
  // One message's frames (at most 16; the rest drained); empty on error.
  std::vector<zmq::message_t> ReceiveFrames();
  // The reply to one [identity][payload] message from `peer`.
  control::Reply Answer(const std::vector<zmq::message_t>& parts,
                        const std::string& peer);
  // Encodes `reply` (ResourceExhausted when over a frame) and sends it to
  // `identity`.
  void SendReply(zmq::message_t& identity, control::Reply reply,
                 const std::string& peer);

  zmq::context_t* context_;
  std::optional<control::CurveServerConfig> curve_;
  const RankKeys* ranks_;
  std::unique_ptr<ZapHandler> zap_;  // outlives socket_: destroyed after it
  zmq::socket_t socket_;
  std::unique_ptr<HandshakeMonitor> monitor_;  // destroyed before socket_
  Service* service_;
  Logger logger_;
  LogLimiter limiter_;  // for every line a peer can cause
  control::RejectCounters rejects_;
  uint64_t handled_ = 0;
  LoopStats loop_stats_;
  // Adds a step that began at (wall_s, cpu_s) and ends now.
  void EndStep(double wall_s, double cpu_s, const char* what);
};

}  // namespace strata::coordinator
