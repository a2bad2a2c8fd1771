#include "control/codec.h"

#include "absl/strings/str_cat.h"

namespace strata::control {

StatusOr<control::Request> DecodeRequest(std::string_view frame,
                                         RejectCounters* counters,
                                         uint64_t* request_id) {
  if (request_id != nullptr) *request_id = 0;
  if (frame.size() > kMaxFrameBytes) {
    ++counters->oversized;
    return absl::InvalidArgumentError(absl::StrCat(
        "frame of ", frame.size(), " bytes exceeds limit ", kMaxFrameBytes));
  }
  control::Request request;
  // ParseFromArray fails on truncated varints/length-delimited fields and on
  // wire-type mismatches; unknown fields are tolerated (forward compat).
  if (!request.ParseFromArray(frame.data(), static_cast<int>(frame.size()))) {
    ++counters->malformed;
    return absl::InvalidArgumentError(
        absl::StrCat("malformed request frame (", frame.size(), " bytes)"));
  }
  if (request_id != nullptr) *request_id = request.request_id();
  if (request.protocol_version() != kProtocolVersion) {
    ++counters->wrong_version;
    return absl::InvalidArgumentError(
        absl::StrCat("protocol version ", request.protocol_version(),
                     " is not supported (expected ", kProtocolVersion, ")"));
  }
  if (request.body_case() == control::Request::BODY_NOT_SET) {
    ++counters->empty_body;
    return absl::InvalidArgumentError(
        absl::StrCat("request ", request.request_id(), " has no body"));
  }
  return request;
}

StatusOr<control::Reply> DecodeReply(std::string_view frame) {
  if (frame.size() > kMaxFrameBytes) {
    return absl::InvalidArgumentError(
        absl::StrCat("reply of ", frame.size(), " bytes exceeds limit"));
  }
  control::Reply reply;
  if (!reply.ParseFromArray(frame.data(), static_cast<int>(frame.size()))) {
    return absl::InvalidArgumentError("malformed reply frame");
  }
  if (reply.protocol_version() != kProtocolVersion) {
    return absl::InvalidArgumentError(absl::StrCat(
        "reply protocol version ", reply.protocol_version(), " unsupported"));
  }
  return reply;
}

std::string EncodeRequest(control::Request request) {
  request.set_protocol_version(kProtocolVersion);
  return request.SerializeAsString();
}

std::string EncodeReply(control::Reply reply) {
  reply.set_protocol_version(kProtocolVersion);
  return reply.SerializeAsString();
}

control::Reply MakeReply(uint64_t request_id, const Status& status) {
  control::Reply reply;
  reply.set_protocol_version(kProtocolVersion);
  reply.set_request_id(request_id);
  reply.mutable_status()->set_code(static_cast<int>(status.code()));
  reply.mutable_status()->set_message(std::string(status.message()));
  return reply;
}

Status ReplyToStatus(const control::Reply& reply) {
  return Status(static_cast<absl::StatusCode>(reply.status().code()),
                reply.status().message());
}

std::string AttemptKey(const std::string& job_id, int attempt) {
  return absl::StrCat(job_id, "/", attempt);
}

}  // namespace strata::control
