#include "control/codec.h"

#include <gtest/gtest.h>

namespace strata::control {
namespace {

control::Request HeartbeatRequest(uint64_t id) {
  control::Request r;
  r.set_request_id(id);
  r.mutable_heartbeat()->set_worker_id("w-a");
  return r;
}

TEST(CodecTest, RoundTripsRequest) {
  RejectCounters c;
  uint64_t id = 0;
  auto r = DecodeRequest(EncodeRequest(HeartbeatRequest(7)), &c, &id);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->request_id(), 7u);
  EXPECT_EQ(id, 7u);
  EXPECT_EQ(r->heartbeat().worker_id(), "w-a");
  EXPECT_EQ(c.Total(), 0u);
}

TEST(CodecTest, RejectsTruncatedFrame) {
  RejectCounters c;
  std::string frame = EncodeRequest(HeartbeatRequest(7));
  frame.resize(frame.size() - 2);  // cuts inside the worker_id string
  auto r = DecodeRequest(frame, &c);
  EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(c.malformed, 1u);
}

TEST(CodecTest, RejectsGarbage) {
  RejectCounters c;
  auto r = DecodeRequest(std::string("\xff\xff\xff\xff\xff\x01", 6), &c);
  EXPECT_FALSE(r.ok());
  EXPECT_EQ(c.malformed, 1u);
}

TEST(CodecTest, RejectsWrongVersionButKeepsRequestId) {
  RejectCounters c;
  control::Request req = HeartbeatRequest(9);
  req.set_protocol_version(99);
  uint64_t id = 0;
  auto r = DecodeRequest(req.SerializeAsString(), &c, &id);
  EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(r.status().message().find("protocol version 99"),
            std::string_view::npos);
  EXPECT_EQ(id, 9u);
  EXPECT_EQ(c.wrong_version, 1u);
}

TEST(CodecTest, RejectsOversizedAndEmptyBody) {
  RejectCounters c;
  EXPECT_FALSE(DecodeRequest(std::string(kMaxFrameBytes + 1, 'x'), &c).ok());
  EXPECT_EQ(c.oversized, 1u);
  control::Request empty;
  EXPECT_FALSE(DecodeRequest(EncodeRequest(empty), &c).ok());
  EXPECT_EQ(c.empty_body, 1u);
  EXPECT_EQ(c.Total(), 2u);
}

TEST(CodecTest, ReplyCarriesStatus) {
  control::Reply reply = MakeReply(3, absl::NotFoundError("no such job 'x'"));
  auto decoded = DecodeReply(EncodeReply(reply));
  ASSERT_TRUE(decoded.ok());
  EXPECT_EQ(decoded->request_id(), 3u);
  Status s = ReplyToStatus(*decoded);
  EXPECT_EQ(s.code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(s.message(), "no such job 'x'");
}

}  // namespace
}  // namespace strata::control
