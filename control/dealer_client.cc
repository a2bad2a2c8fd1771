#include "control/dealer_client.h"

#include <chrono>

#include "absl/strings/str_cat.h"
#include "control/codec.h"

namespace strata::control {

DealerClient::DealerClient(zmq::context_t* context, const std::string& endpoint,
                           const std::optional<CurveClientConfig>& curve)
    : socket_(*context, zmq::socket_type::dealer) {
  if (curve) {
    Status s = ConfigureCurveClient(&socket_, *curve);
    STRATA_CHECK(s.ok());
  }
  socket_.set(zmq::sockopt::linger, 0);
  socket_.set(zmq::sockopt::maxmsgsize, static_cast<int64_t>(kMaxFrameBytes));
  socket_.set(zmq::sockopt::rcvhwm, kControlHwm);
  socket_.set(zmq::sockopt::sndhwm, kControlHwm);
  socket_.connect(endpoint);
}

StatusOr<control::Reply> DealerClient::Call(control::Request request,
                                            int timeout_ms) {
  uint64_t id = next_id_++;
  request.set_request_id(id);
  std::string out = EncodeRequest(std::move(request));
  if (out.size() > kMaxFrameBytes) {
    // The server would drop the connection unanswered (ZMQ_MAXMSGSIZE):
    // a local error, said now instead of a timeout.
    return absl::OutOfRangeError(absl::StrCat(
        "request ", id, " is ", out.size(),
        " bytes; one control frame holds at most ", kMaxFrameBytes, " bytes"));
  }
  auto deadline =
      std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
  try {
    if (!socket_.send(zmq::buffer(out), zmq::send_flags::dontwait)) {
      return absl::UnavailableError("control socket send queue is full");
    }
    while (true) {
      auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
          deadline - std::chrono::steady_clock::now());
      if (left.count() <= 0) break;
      zmq::pollitem_t item{socket_.handle(), 0, ZMQ_POLLIN, 0};
      zmq::poll(&item, 1, left);
      if ((item.revents & ZMQ_POLLIN) == 0) continue;
      zmq::message_t msg;
      if (!socket_.recv(msg, zmq::recv_flags::dontwait)) continue;
      auto reply = DecodeReply(std::string_view(msg.data<char>(), msg.size()));
      if (!reply.ok()) return reply.status();
      if (reply->request_id() != id) continue;  // stale reply
      RETURN_IF_ERROR(ReplyToStatus(*reply));
      return reply;
    }
  } catch (const zmq::error_t& e) {
    return absl::UnavailableError(absl::StrCat("control socket: ", e.what()));
  }
  return absl::DeadlineExceededError(
      absl::StrCat("no reply to request ", id, " within ", timeout_ms, " ms"));
}

}  // namespace strata::control
