// libFuzzer target for the control envelope decoder (control/codec.h):
// every input goes through DecodeRequest and DecodeReply, which
// must never crash, hang or leak (ASan/UBSan in the fuzz build) and must keep
// their contract:
//   - a rejected request is InvalidArgument and bumps exactly one counter;
//   - an accepted request bumps none, reports its request id, and survives
//     an encode/decode round trip unchanged;
//   - an accepted reply round-trips too and its status converts to a Status.
// Built by tests/fuzz/CMakeLists.txt (clang, -fsanitize=fuzzer) and, without
// libFuzzer, linked into envelope_corpus_test to replay the checked-in
// corpus with any compiler. docs/control-plane.md "Security" says how to run
// it longer.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "common/status.h"
#include "control/codec.h"

namespace sc = strata::control;

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
    STRATA_CHECK(again->SerializeAsString() == request->SerializeAsString());
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
    STRATA_CHECK(again->SerializeAsString() == reply->SerializeAsString());
  } else {
    STRATA_CHECK(absl::IsInvalidArgument(reply.status()));
  }
  return 0;
}
