// Step telemetry the worker agent relays to the coordinator. TelemetrySink
// (ranks PUSH StepReports to an ipc:// socket) is the implementation; unit
// tests of the agent use a fake. Used on the agent's thread.
#pragma once

#include <vector>

#include "proto/control.pb.h"

namespace strata::worker {

// Steps kept per (job, rank) until the next heartbeat takes them, and
// while the coordinator is unreachable: 256 steps of ~300 bytes, so a node
// of 8 ranks stays well inside one 4 MiB control frame.
inline constexpr int kMaxQueuedSteps = 256;

class StepSource {
 public:
  virtual ~StepSource() = default;
  // Reports received since the last call, in arrival order: every step of
  // every rank (the coordinator's fault monitor reads each), at most
  // kMaxQueuedSteps per (job, rank) between calls (older ones are dropped
  // and counted). Never blocks.
  virtual std::vector<control::StepReport> TakeChanged() = 0;
};

}  // namespace strata::worker
