// The planner's search (docs/planner.md): enumerate TP x PP x DP x CP x VPP x
// micro-batch x ZeRO x recompute, prune by divisibility and memory, score by
// predicted step time, return the top K as Plans with their placement.
//
// The search is exhaustive unless it runs out of its time budget; it then
// stops, returns the best plans found so far and logs a warning (PLAN)
// saying how many candidates it scored.
#pragma once

#include <cstdint>

#include "absl/types/span.h"
#include "common/field_range.h"
#include "common/status.h"
#include "proto/job.pb.h"
#include "proto/model.pb.h"
#include "proto/plan.pb.h"
#include "proto/topology.pb.h"

namespace strata::planner {

// Default time budget of a search. A full search of 16,384 GPUs takes
// under 0.1 s on one core (bench/plan_bench.cc), so the default only stops
// pathological inputs: the largest accepted sizes with divisor-rich GPU
// counts and batches (docs/config.md has the measured worst cases).
inline constexpr double kDefaultTimeBudgetS = 1.0;
// Candidates scored between two looks at the clock.
inline constexpr int kBudgetCheckInterval = 64;
// The search scores shards of its layouts on up to this many threads (one
// per hardware thread; docs/planner.md "Search"). The result does not
// depend on the number.
inline constexpr int kMaxSearchThreads = 4;
// Bounds of the searched space (pinned --fix values may exceed them):
// - virtual stages up to kMaxSearchVpp: the interleaved schedule cuts the
//   bubble by 1/v but multiplies the pipeline sends by v (Narayanan et al.
//   SC'21 §2.2), so large v stop paying;
// - micro-batches up to kMaxMicroBatchTokens tokens (or one sequence):
//   GEMMs are saturated there (b s / (b s + kGemmHalfDim) > 0.998), so a
//   larger b only adds activation memory and pipeline bubble;
// - context-parallel chunks of at least kMinCpChunkTokens tokens (each of
//   the 2c chunks): smaller ones run attention below half efficiency.
inline constexpr int kMaxSearchVpp = 16;
inline constexpr int64_t kMaxMicroBatchTokens = 65536;
inline constexpr int kMinCpChunkTokens = 128;
// Largest accepted GPU count of a plan (PlanRanges).
inline constexpr int64_t kMaxGpus = 131072;

// The documented ranges of `strata plan`'s own flags (docs/config.md);
// --global-batch, --seq and --fix take JobRanges' global_batch,
// seq_length and constraints.* ranges.
absl::Span<const FieldRange> PlanRanges();

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
  // Threads that score the space (0: one per hardware thread, at most
  // kMaxSearchThreads). The report does not depend on it.
  int search_threads = 0;
  // Skip candidates whose lower bound (CostModel::StepLowerBound) cannot
  // enter the top K (docs/planner.md "Search"); the plans do not change.
  // Off: every candidate is scored (tests compare the two).
  bool branch_and_bound = true;
};

// Runs the search. InvalidArgument for impossible requests (a value outside
// PlanRanges or JobRanges, naming it and its range, a GPU count no layout can
// use, pinned values that contradict each other, a negative time budget);
// ResourceExhausted when layouts exist but none fits in memory, naming the
// closest one and what it lacked; DeadlineExceeded when the time budget ran out
// before any candidate fit. Thread-safe.
StatusOr<PlanReport> PlanJob(const PlanRequest& request);

}  // namespace strata::planner
