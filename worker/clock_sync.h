// A worker's estimate of its wall clock against the coordinator's, for
// traces that line up across nodes (docs/observe.md "Traces"). Every
// heartbeat is a sample: the worker's clock before the call, the
// coordinator's when the request arrived and when it answered
// (HeartbeatReply.coordinator_recv_unix_us, coordinator_unix_us), the
// worker's when the answer arrived. observe::EstimateClockOffset over the
// last kSamples samples: the one with the smallest network delay gives the
// offset, wrong by at most half that delay. The window bounds how stale the
// estimate gets while the clocks drift apart: a crystal off by 50 ppm moves
// 1.6 ms in 32 s (the usual tolerance of PC oscillators, which NTP's 500
// ppm limit in RFC 5905 bounds from above).
#pragma once

#include <cstdint>
#include <deque>
#include <optional>

#include "observe/trace.h"
#include "proto/control.pb.h"

namespace strata::worker {

class ClockSync {
 public:
  static constexpr int kSamples = 32;

  // One round trip: local wall us before the call and after the reply;
  // the coordinator's us when it answered (0: it sent none) and when the
  // request reached it (0: unknown).
  void Add(int64_t local_send_us, int64_t remote_us, int64_t local_recv_us,
           int64_t remote_recv_us = 0);
  // The current estimate; nullopt before any usable sample.
  std::optional<control::ClockEstimate> Estimate() const;

 private:
  std::deque<observe::ClockSample> samples_;
};

}  // namespace strata::worker
