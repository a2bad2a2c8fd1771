// How long each step of the coordinator's event loop held it: one request
// handled (decode, Service::Handle, reply sent) or one tick (Service::Tick
// and the server's own tick: placement, liveness, /metrics snapshots). Both
// the wall time (what a heartbeat queued behind the step waits) and the
// loop thread's CPU time (what the step costs, whatever else the machine
// runs: on a loaded machine the wall time includes the time the thread was
// not scheduled). Exported in /metrics as
// strata_coordinator_loop_step_seconds{clock="wall"|"cpu"}
// (docs/control-plane.md "Benchmark": no step of the 16,384-rank hand-out
// should hold the loop for more than 50 ms). Loop thread only.
#pragma once

#include <string>
#include <vector>

#include "observe/metrics.h"

namespace strata::coordinator {

class LoopStats {
 public:
  // Bucket bounds in seconds: 1 ms to 5 s, with 50 ms (the goal) a bound.
  static const std::vector<double>& Buckets();

  void Add(double wall_s, double cpu_s);

  const observe::HistogramCounts& wall() const { return wall_; }
  const observe::HistogramCounts& cpu() const { return cpu_; }
  double max_wall_s() const { return max_wall_s_; }
  double max_cpu_s() const { return max_cpu_s_; }

 private:
  observe::HistogramCounts wall_, cpu_;
  double max_wall_s_ = 0, max_cpu_s_ = 0;
};

}  // namespace strata::coordinator
