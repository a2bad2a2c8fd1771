// Thread CPU time the coordinator spends making what its HTTP listener
// serves, by product (the metric strata_coordinator_render_cpu_seconds_total
// {what=dashboard|metrics|trace}, docs/observe.md): on the loop, and for
// /metrics also on the HTTP thread that renders the loop's snapshot.
// Thread-safe (atomic counters).
#pragma once

#include <atomic>
#include <cstdint>
#include <map>
#include <string>

#include "common/cpu_time.h"

namespace strata::coordinator {

class RenderCpu {
 public:
  enum What { kDashboard = 0, kMetrics = 1, kTrace = 2 };

  // Runs `make` on this thread and adds the thread CPU time it took.
  template <typename F>
  void Time(What what, F&& make) {
    const double t0 = ThreadCpuSeconds();
    make();
    ns_[what] += static_cast<int64_t>((ThreadCpuSeconds() - t0) * 1e9);
  }

  // what -> seconds so far (MetricsInput::render_cpu_seconds).
  std::map<std::string, double> Seconds() const {
    return {{"dashboard", ns_[kDashboard] * 1e-9},
            {"metrics", ns_[kMetrics] * 1e-9},
            {"trace", ns_[kTrace] * 1e-9}};
  }

 private:
  std::atomic<int64_t> ns_[3] = {0, 0, 0};
};

}  // namespace strata::coordinator
