// Envelope encoding/decoding for the control protocol (proto/control.proto).
// Decoding never crashes on bad input: oversized, truncated, malformed or
// wrong-version frames return InvalidArgument naming the reason, and the
// caller counts them in RejectCounters. Pure functions; thread-compatible.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "common/status.h"
#include "proto/control.pb.h"

namespace strata::control {

// Largest frame accepted on the control socket. Bigger frames are dropped by
// ZeroMQ (ZMQ_MAXMSGSIZE) and by DecodeRequest.
inline constexpr size_t kMaxFrameBytes = 4 << 20;
inline constexpr uint32_t kProtocolVersion = control::PROTOCOL_VERSION_CURRENT;
// Messages libzmq queues per connection and direction on a control socket
// (ZMQ_RCVHWM and ZMQ_SNDHWM of the coordinator's ROUTER and the clients'
// DEALERs; libzmq's default is 1000). Every client is request-reply with
// one request in flight (DealerClient::Call waits for its reply), so 16
// leaves room for stale replies and bounds what one connection can make
// the coordinator hold to 16 x 4 MiB = 64 MiB each way, where the default
// allowed 1000 frames (up to 4 GB): a client that floods requests and reads
// no replies has its replies dropped at the bound (ROUTER drops at the
// high-water mark), and one that floods requests faster than they are
// handled is stopped by TCP flow control once its 16 are queued
// (docs/control-plane.md "Wire protocol").
inline constexpr int kControlHwm = 16;

// Why frames were rejected. Not thread-safe; owned by one event loop.
struct RejectCounters {
  uint64_t oversized = 0;
  uint64_t malformed = 0;
  uint64_t wrong_version = 0;
  uint64_t empty_body = 0;
  // Connections refused by CURVE security (coordinator/security/): ZAP
  // denials plus failed handshakes (plaintext clients, wrong server key).
  uint64_t unauthenticated = 0;
  uint64_t Total() const {
    return oversized + malformed + wrong_version + empty_body + unauthenticated;
  }
};

// Parses one frame into a Request. On error, `*request_id` (if non-null) is
// set to the request id when the frame was parseable enough to carry one, so
// the server can still address an error reply; otherwise 0.
StatusOr<control::Request> DecodeRequest(std::string_view frame,
                                         RejectCounters* counters,
                                         uint64_t* request_id = nullptr);

// Same checks for replies (used by clients).
StatusOr<control::Reply> DecodeReply(std::string_view frame);

// Serialises with the current protocol version stamped in.
std::string EncodeRequest(control::Request request);
std::string EncodeReply(control::Reply reply);

// Builds the reply envelope for `request_id` carrying `status`.
control::Reply MakeReply(uint64_t request_id, const Status& status);

// Converts a reply's status field back into an absl::Status.
Status ReplyToStatus(const control::Reply& reply);

// "<job_id>/<attempt>": how heartbeat stop and diagnose orders, workers'
// holds and the KV name one attempt of a job.
std::string AttemptKey(const std::string& job_id, int attempt);

}  // namespace strata::control
