#include "coordinator/security/handshake_monitor.h"

#include <zmq.h>

#include <atomic>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace strata::coordinator {
namespace {

constexpr int kEvents =
    ZMQ_EVENT_HANDSHAKE_FAILED_PROTOCOL | ZMQ_EVENT_HANDSHAKE_FAILED_NO_DETAIL;

std::string Describe(uint16_t event, uint32_t value) {
  if (event == ZMQ_EVENT_HANDSHAKE_FAILED_NO_DETAIL) {
    return absl::StrCat("handshake failed: ", zmq_strerror(value));
  }
  switch (value) {
    case ZMQ_PROTOCOL_ERROR_ZMTP_MECHANISM_MISMATCH:
      return "mechanism mismatch (a plaintext client? CURVE is required)";
    case ZMQ_PROTOCOL_ERROR_ZMTP_CRYPTOGRAPHIC:
      return "CURVE cryptographic error (client uses a wrong server key?)";
    default:
      return absl::StrFormat("ZMTP protocol error 0x%08x", value);
  }
}

}  // namespace

HandshakeMonitor::HandshakeMonitor(zmq::context_t* context,
                                   zmq::socket_t* socket, Logger logger)
    : context_(context),
      socket_(socket),
      logger_(std::move(logger)),
      limiter_(logger_) {}

HandshakeMonitor::~HandshakeMonitor() {
  if (started_) {
    zmq_socket_monitor(socket_->handle(), nullptr, 0);
    pair_.close();
  }
}

Status HandshakeMonitor::Start() {
  static std::atomic<uint64_t> next{0};
  const std::string endpoint =
      absl::StrCat("inproc://strata-handshake-monitor-", next++);
  if (zmq_socket_monitor(socket_->handle(), endpoint.c_str(), kEvents) != 0) {
    return absl::InternalError(
        absl::StrCat("zmq_socket_monitor: ", zmq_strerror(zmq_errno())));
  }
  try {
    pair_ = zmq::socket_t(*context_, zmq::socket_type::pair);
    pair_.set(zmq::sockopt::linger, 0);
    pair_.connect(endpoint);
  } catch (const zmq::error_t& e) {
    zmq_socket_monitor(socket_->handle(), nullptr, 0);
    return absl::InternalError(absl::StrCat("monitor socket: ", e.what()));
  }
  started_ = true;
  return absl::OkStatus();
}

uint64_t HandshakeMonitor::Drain() {
  if (!started_) return 0;
  uint64_t count = 0;
  while (true) {
    // Monitor events are two frames: 6 bytes (uint16 event, uint32 value,
    // native byte order) and the endpoint (zmq_socket_monitor(3)).
    zmq::message_t event, address;
    try {
      if (!pair_.recv(event, zmq::recv_flags::dontwait)) break;
      if (event.more() && !pair_.recv(address, zmq::recv_flags::dontwait)) {
        break;
      }
    } catch (const zmq::error_t& e) {
      break;
    }
    if (event.size() < 6) continue;
    uint16_t id;
    uint32_t value;
    std::memcpy(&id, event.data(), sizeof(id));
    std::memcpy(&value, static_cast<const char*>(event.data()) + 2,
                sizeof(value));
    if ((id & kEvents) == 0) continue;
    ++count;
    ++failures_;
    limiter_.Warn(address.to_string(), Describe(id, value),
                  "rejected unauthenticated connection on {}: {} ({} "
                  "handshake failures so far)",
                  address.to_string(), Describe(id, value), failures_);
  }
  limiter_.Flush();
  return count;
}

}  // namespace strata::coordinator
