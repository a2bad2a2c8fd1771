// Step telemetry the worker agent relays to the coordinator. TelemetrySink
// (ranks PUSH StepReports to an ipc:// socket) is the implementation; unit
// tests of the agent use a fake. Used on the agent's thread.
#pragma once

#include <vector>

#include "proto/control.pb.h"

namespace strata::worker {

class StepSource {
 public:
  virtual ~StepSource() = default;
  // Reports received since the last call, the latest per (job, rank).
  // Never blocks.
  virtual std::vector<control::StepReport> TakeChanged() = 0;
};

}  // namespace strata::worker
