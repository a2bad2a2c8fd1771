// CPU ranks that share their node's cores (ClusterSpec.cpu_cores_per_node;
// docs/planner.md "Calibration"): the idle cores of the 1F1B pipeline's
// fill and drain. CostModel::ShareCores (core_sharing.cc) adds them to the
// node's work before dividing by its cores.
#pragma once

#include <cstdint>

#include "absl/types/span.h"

namespace strata::planner {

// Core-seconds that `cores` cores of one node stay idle in one step of the
// 1F1B schedule (Narayanan et al. SC'21 §2.2, PipeDream-Flush; Megatron's
// non-interleaved schedule) because fewer of the node's ranks have work
// than it has cores.
//
// Four waves cross the pipeline one stage at a time: the first forward
// (fill), the first backward (a stage that has run its warm-up forwards
// waits for it), and, the schedule being symmetric in time, the last
// forward and the last backward (drain). While a wave is at stage j only
// the stages on one side of it have work: stages 0..j behind the first
// forward and the last backward, stages j..p-1 behind the first backward
// and the last forward. Each wave holds stage j for one forward or one
// backward, so the two waves on a side cost together one micro-batch of
// stage j, `stage_mb_s[j]` (forward + backward + its sends, on a core of
// its own). Summed over the stages, on the stages this node holds:
//
//   idle = sum_{j <= p-2} mb_j max(0, cores - r[0..j])
//        + sum_{j >= 1}   mb_j max(0, cores - r[j..p-1])
//
// r[a..b]: this node's ranks of stages a..b. Stage j is ranks
// [j S, (j+1) S), S = `stage_ranks` (its TP, CP and DP ranks start and
// stop together); the node holds ranks [first, end). With the interleaved
// schedule (`v` > 1) a wave holds a device for one virtual stage, mb_j / v,
// as the bubble shrinks by v (Narayanan §2.2); not simulated.
//
// 0 when the node's ranks do not outnumber its cores (each has a core, and
// the 1F1B critical path bounds the step). Checked against a simulation of
// 1F1B with the ranks sharing the cores fairly (docs/planner.md): with
// every rank on one node and equal stages, max(critical path, (work +
// idle) / cores) is its step time exactly (m >= 1, any p, t, d, cores);
// with stages +-15% apart within 5%; across nodes it is a lower bound.
double FillDrainIdleCoreSeconds(absl::Span<const double> stage_mb_s,
                                int64_t stage_ranks, int64_t first,
                                int64_t end, double cores, int v);

}  // namespace strata::planner
