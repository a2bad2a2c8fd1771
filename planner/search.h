// The planner's search (docs/planner.md): enumerate TP x PP x DP x CP x VPP x
// micro-batch x ZeRO x recompute, prune by divisibility and memory, score by
// predicted step time, return the top K as Plans with their placement.
//
// The search is exhaustive unless it runs out of its time budget; it then
// stops, returns the best plans found so far and logs a warning (PLAN)
// saying how many candidates it scored.
#pragma once

#include <cstdint>

#include "common/status.h"
#include "proto/job.pb.h"
#include "proto/model.pb.h"
#include "proto/plan.pb.h"
#include "proto/topology.pb.h"

namespace strata::planner {

// Default time budget of a search. A full search of 16,384 GPUs takes
// under 0.1 s on one core (bench/plan_bench.cc), so the default only stops
// pathological inputs (e.g. huge batches with many divisors).
inline constexpr double kDefaultTimeBudgetS = 10.0;
// Candidates scored between two looks at the clock.
inline constexpr int kBudgetCheckInterval = 64;

struct PlanRequest {
  ModelSpec model;      // normalised (LoadModel / NormalizeModel)
  ClusterSpec cluster;  // validated (topology::LoadCluster)
  JobSpec job;          // global batch, sequence, constraints (--fix)
  int64_t gpus = 0;     // every plan uses exactly this many GPUs
  int top_k = 5;
  // Only plans Megatron-LM can run: ZeRO stage 0, or 1 as its distributed
  // optimizer (used by --emit megatron).
  bool megatron_compatible = false;
  // Per-rank placement and group lists for the best plan (can be large).
  bool with_placement = true;
  // Wall-clock seconds the search may take (checked every
  // kBudgetCheckInterval candidates); 0 stops at the first check.
  double time_budget_s = kDefaultTimeBudgetS;
};

// Runs the search. InvalidArgument for impossible requests (bad batch or
// GPU count, a GPU count no layout can use, pinned values that contradict
// each other, a negative time budget); ResourceExhausted when layouts exist
// but none fits in memory, naming the closest one and what it lacked;
// DeadlineExceeded when the time budget ran out before any candidate fit.
// Thread-safe.
StatusOr<PlanReport> PlanJob(const PlanRequest& request);

}  // namespace strata::planner
