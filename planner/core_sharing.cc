// CPU ranks sharing their node's cores: the step is at least a node's work
// plus its fill-and-drain idle, over its cores (core_sharing.h;
// docs/planner.md "Calibration").
#include "planner/core_sharing.h"

#include <algorithm>
#include <vector>

#include "planner/cost_model.h"
#include "planner/cost_model_parts.h"

namespace strata::planner {

double FillDrainIdleCoreSeconds(absl::Span<const double> stage_mb_s,
                                int64_t stage_ranks, int64_t first,
                                int64_t end, double cores, int v) {
  const int64_t p = static_cast<int64_t>(stage_mb_s.size());
  if (end - first <= cores || p < 2 || stage_ranks < 1) return 0;
  const int64_t s = stage_ranks;
  double idle = 0;
  // The stages with ranks on this node.
  const int64_t lo = first / s, hi = std::min(p - 1, (end - 1) / s);
  for (int64_t j = lo; j <= hi; ++j) {
    const double slot = stage_mb_s[j] / std::max(1, v);
    // Behind the first forward and the last backward: stages 0..j.
    if (j <= p - 2) {
      const double behind = static_cast<double>(std::min(end, (j + 1) * s) - first);
      idle += slot * std::max(0.0, cores - behind);
    }
    // Behind the first backward and the last forward: stages j..p-1.
    if (j >= 1) {
      const double behind = static_cast<double>(end - std::max(first, j * s));
      idle += slot * std::max(0.0, cores - behind);
    }
  }
  return idle;
}

// CPU ranks share their node's cores (ClusterSpec.cpu_cores_per_node), so
// a step takes at least the work of a node's ranks, plus the core-seconds
// its cores idle while the pipeline fills and drains
// (FillDrainIdleCoreSeconds), divided by its cores, whatever the critical
// path. A rank's work is its step without the waits: the micro-batches
// (m x mb_s: compute, and TP and pipeline transfers, which on shared
// memory are copies the ranks make themselves), all of its data-parallel
// traffic (the reduction that overlaps the backward runs on the same
// cores) and the optimizer step. Its bubble is not work: a rank waiting on
// a condition variable (comm/inproc, the transport of strata-bench train)
// yields its core to another rank, so only the bubble no other rank of
// the node can fill (the fill and drain, when fewer ranks have work than
// there are cores) adds to the step. With every rank on one node and equal
// stages, the larger of this bound and the 1F1B critical path is exactly
// the step time of a simulation of 1F1B with the ranks sharing the cores
// fairly (core_sharing_test); the scheduler's handoffs
// (intra_node_latency_s) and cache sharing cost more.
void CostModel::ShareCores(const Candidate& c, const Shape& sh,
                           const StageClasses& classes,
                           Evaluation* out) const {
  const int gpn = net_.gpus_per_node();
  const double cores = net_.cpu_cores_per_node();
  std::vector<double> node_work(net_.nodes().size(), 0.0);
  std::vector<double> mb(sh.p, 0.0);
  for (int i = 0; i < sh.p; ++i) {
    const int k = layout_->stage_class[i];
    const StageClass& cl = classes.at[k];
    const std::vector<int>& at = layout_->positions[k];
    const int index = static_cast<int>(
        std::lower_bound(at.begin(), at.end(), i) - at.begin());
    const int layers = cl.layers - (index < cl.trimmed ? 1 : 0);
    const StageCost sc = CostOfStage(c, sh, cl, i, layers);
    mb[i] = sc.mb_s;
    const double work = sh.m * sc.mb_s + sc.dp_total_s + sc.optimizer_s +
                        sc.offload_total_s;
    // The stage's ranks i S .. (i + 1) S - 1, node by node.
    for (int64_t r = i * sh.stage_ranks; r < (i + 1) * sh.stage_ranks;) {
      const int64_t node = r / gpn;
      const int64_t end = std::min((node + 1) * gpn, (i + 1) * sh.stage_ranks);
      if (node < static_cast<int64_t>(node_work.size())) {
        node_work[node] += work * static_cast<double>(end - r);
      }
      r = end;
    }
  }
  const int64_t ranks = sh.p * sh.stage_ranks;
  double busiest = 0, busiest_idle = 0;
  for (size_t n = 0; n < node_work.size(); ++n) {
    const int64_t first = static_cast<int64_t>(n) * gpn;
    const int64_t end = std::min(first + gpn, ranks);
    if (end <= first) break;
    const double idle =
        FillDrainIdleCoreSeconds(mb, sh.stage_ranks, first, end, cores, sh.v);
    const double t = (node_work[n] + idle) / cores;
    if (t > busiest) {
      busiest = t;
      busiest_idle = idle / cores;
    }
  }
  if (busiest > out->step_s) {
    out->core_sharing_s = busiest - out->step_s;
    out->fill_drain_s = std::min(busiest_idle, out->core_sharing_s);
    out->step_s = busiest;
  }
}

}  // namespace strata::planner
