// ZAP handler (ZeroMQ Authentication Protocol, RFC 27) for the coordinator:
// a REP socket bound to inproc://zeromq.zap.01 of the server's context,
// served on its own thread. libzmq asks it about every CURVE handshake
// (RFC 26) on sockets with ZMQ_ZAP_DOMAIN set; it answers 200 only for
// mechanism CURVE, domain control::kZapDomain and a client public key in the
// allow-list, and 400 with a reason for everything else. Each denial is
// counted (denied()) and logged at warn, rate-limited per peer address and
// reason (common/log_limiter.h). An unknown key triggers a re-read of the
// allow-list file/directory, at most once a second, so newly authorized
// clients get in without a restart. A re-read that fails the trust checks of
// control/curve_keys.h (group/world-writable, foreign-owned) is refused and
// logged at error; the last good list stays in force.
//
// One handler per zmq context (the inproc endpoint is per context): Start()
// fails with AlreadyExists if another one is bound.
#pragma once

#include <atomic>
#include <cstdint>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>
#include <zmq.hpp>

#include "common/log_limiter.h"
#include "common/logging.h"
#include "common/status.h"
#include "control/curve_config.h"
#include "coordinator/security/rank_keys.h"

namespace strata::coordinator {

inline constexpr char kZapEndpoint[] = "inproc://zeromq.zap.01";

// Raw 32-byte client public key -> the ZAP user id of its identity
// (identity.h: "admin:NAME", "user:NAME", "worker:NODE"), which libzmq puts
// on every message of the connection for the access policy.
using AllowList = std::unordered_map<std::string, std::string>;
AllowList MakeAllowList(const std::vector<control::AuthorizedKey>& keys);

// A ZAP request as the handler's REP socket receives it (RFC 27 "ZAP
// request": the delimiter is stripped by REP).
struct ZapRequest {
  std::string version;     // "1.0"
  std::string request_id;  // opaque, echoed
  std::string domain;
  std::string address;  // peer IP address
  std::string routing_id;
  std::string mechanism;  // "NULL", "PLAIN", "CURVE"
  std::vector<std::string> credentials;
};

struct ZapDecision {
  bool allowed = false;
  std::string status_code;  // "200" or "400"
  std::string status_text;  // reason, logged and sent to the peer
  std::string user_id;      // the key's name when allowed
  std::string key_z85;      // the client key when one was presented
};

// Parses the frames of a request; InvalidArgument if there are fewer than
// the six fixed frames.
StatusOr<ZapRequest> ParseZapRequest(const std::vector<std::string>& frames);

// The pure decision for one request. Version must be "1.0", domain
// control::kZapDomain, mechanism CURVE with one 32-byte credential in
// `allowed` or issued by `ranks` (when given): a rank's per-attempt key.
ZapDecision DecideZap(const ZapRequest& request, const AllowList& allowed,
                      const RankKeys* ranks = nullptr);

class ZapHandler {
 public:
  // `context` and `ranks` (nullable) must outlive the handler. Does not
  // bind yet.
  ZapHandler(zmq::context_t* context, const control::CurveServerConfig& config,
             Logger logger, const RankKeys* ranks = nullptr);
  ~ZapHandler();  // Stop()
  ZapHandler(const ZapHandler&) = delete;
  ZapHandler& operator=(const ZapHandler&) = delete;

  // Binds kZapEndpoint and starts the thread. Call before the CURVE server
  // socket binds, so no handshake happens without the handler.
  Status Start();
  // Stops and joins the thread (returns within ~100 ms). Idempotent.
  void Stop();

  // Handshakes answered 400 / 200 so far. Thread-safe.
  uint64_t denied() const { return denied_.load(); }
  uint64_t allowed() const { return allowed_.load(); }

 private:
  void Loop();
  void HandleOne();
  ZapDecision Decide(const ZapRequest& request);

  zmq::socket_t socket_;  // REP; used by the thread once started
  Logger logger_;
  LogLimiter limiter_;
  std::string authorized_path_;
  AllowList allowed_keys_;  // the thread's once started
  const RankKeys* ranks_;
  std::chrono::steady_clock::time_point last_reload_{};
  std::string reload_error_;  // why the last re-read was refused, if it was
  std::atomic<bool> stop_{false};
  std::atomic<uint64_t> denied_{0};
  std::atomic<uint64_t> allowed_{0};
  std::thread thread_;
};

}  // namespace strata::coordinator
