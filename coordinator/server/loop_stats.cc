#include "coordinator/server/loop_stats.h"

#include <algorithm>

namespace strata::coordinator {

const std::vector<double>& LoopStats::Buckets() {
  static const std::vector<double> buckets = {
      0.001, 0.002, 0.005, 0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1, 2, 5};
  return buckets;
}

void LoopStats::Add(double wall_s, double cpu_s) {
  wall_.Add(Buckets(), wall_s);
  cpu_.Add(Buckets(), cpu_s);
  max_wall_s_ = std::max(max_wall_s_, wall_s);
  max_cpu_s_ = std::max(max_cpu_s_, cpu_s);
}

}  // namespace strata::coordinator
