// The worker's end of rank telemetry (docs/architecture.md): a ZeroMQ PULL
// socket bound at an ipc:// endpoint exported to ranks as STRATA_TELEMETRY.
// Ranks PUSH one serialized control.StepReport per step; the worker agent
// takes them (StepSource: every step, bounded per rank) and forwards them
// with its next heartbeat. Frames that do not
// parse or exceed 64 KiB are dropped and counted. One thread; not thread-safe.
#pragma once

#include <cstdint>
#include <deque>
#include <map>
#include <string>
#include <utility>
#include <vector>
#include <zmq.hpp>

#include "common/status.h"
#include "proto/control.pb.h"
#include "worker/step_source.h"

namespace strata::worker {

class TelemetrySink : public StepSource {
 public:
  explicit TelemetrySink(zmq::context_t* context);
  Status Bind(const std::string& endpoint);

  // Reads every pending frame (without blocking), then returns the reports
  // received since the last call (StepSource).
  std::vector<control::StepReport> TakeChanged() override;
  uint64_t dropped() const { return dropped_; }

 private:
  void Drain();

  zmq::socket_t socket_;
  std::map<std::pair<std::string, int>, std::deque<control::StepReport>>
      changed_;
  uint64_t dropped_ = 0;
};

}  // namespace strata::worker
