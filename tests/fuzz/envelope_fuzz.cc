// libFuzzer target for the control envelope decoder (control/codec.h):
// every input goes through DecodeRequest and DecodeReply, which
// must never crash, hang or leak (ASan/UBSan in the fuzz build) and must keep
// their contract:
//   - a rejected request is InvalidArgument and bumps exactly one counter;
//   - an accepted request bumps none, reports its request id, and survives
//     an encode/decode round trip unchanged (compared in deterministic
//     serialization: protobuf writes map entries in hash order, so two equal
//     messages with a map of two or more entries may encode differently);
//   - an accepted reply round-trips too and its status converts to a Status.
// Built by tests/fuzz/CMakeLists.txt (clang, -fsanitize=fuzzer) and, without
// libFuzzer, linked into envelope_corpus_test to replay the checked-in
// corpus with any compiler. docs/control-plane.md "Security" says how to run
// it longer.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include <google/protobuf/io/coded_stream.h>
#include <google/protobuf/io/zero_copy_stream_impl_lite.h>
#include <google/protobuf/message_lite.h>

#include "common/status.h"
#include "control/codec.h"

namespace sc = strata::control;

namespace {

// The message's bytes with map entries sorted by key.
std::string Canonical(const google::protobuf::MessageLite& m) {
  std::string out;
  {
    google::protobuf::io::StringOutputStream stream(&out);
    google::protobuf::io::CodedOutputStream coded(&stream);
    coded.SetSerializationDeterministic(true);
    STRATA_CHECK(m.SerializeToCodedStream(&coded));
  }
  return out;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view frame(reinterpret_cast<const char*>(data), size);

  sc::RejectCounters counters;
  uint64_t request_id = 0xdeadbeef;
  auto request = sc::DecodeRequest(frame, &counters, &request_id);
  if (request.ok()) {
    STRATA_CHECK_EQ(counters.Total(), 0u);
    STRATA_CHECK_EQ(request_id, request->request_id());
    STRATA_CHECK_EQ(request->protocol_version(), sc::kProtocolVersion);
    const std::string bytes = sc::EncodeRequest(*request);
    auto again = sc::DecodeRequest(bytes, &counters);
    STRATA_CHECK(again.ok());
    STRATA_CHECK_EQ(counters.Total(), 0u);
    STRATA_CHECK(Canonical(*again) == Canonical(*request));
  } else {
    STRATA_CHECK(absl::IsInvalidArgument(request.status()));
    STRATA_CHECK_EQ(counters.Total(), 1u);
  }

  auto reply = sc::DecodeReply(frame);
  if (reply.ok()) {
    STRATA_CHECK_EQ(reply->protocol_version(), sc::kProtocolVersion);
    (void)sc::ReplyToStatus(*reply).ToString();
    auto again = sc::DecodeReply(sc::EncodeReply(*reply));
    STRATA_CHECK(again.ok());
    STRATA_CHECK(Canonical(*again) == Canonical(*reply));
  } else {
    STRATA_CHECK(absl::IsInvalidArgument(reply.status()));
  }
  return 0;
}
