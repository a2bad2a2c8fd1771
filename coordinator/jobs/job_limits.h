// Upper bounds on what a job may ask of the coordinator (docs/control-plane.md
// "Limits"). Every size that drives an allocation in the coordinator or in a
// launch order (nodes, ranks, argv, environment) is checked against these
// before it is used: at submit, when stored jobs are loaded at start, and
// again when an attempt is placed on real workers. A job that breaks them is
// refused (submit) or failed with the reason (stored, placed); it never gets
// to allocate. Pure functions; thread-compatible.
#pragma once

#include <cstddef>
#include <cstdint>

#include "common/status.h"
#include "proto/control.pb.h"
#include "proto/job.pb.h"

namespace strata::coordinator {

// Defaults sized for the largest job the planner plans for (16,384 nodes of
// 8 GPUs: 131,072 ranks) with room to spare; each is a strata-coordinator
// flag (named in the error messages). docs/control-plane.md "Limits".
struct JobLimits {
  int max_nodes = 32768;          // --max-nodes
  int max_ranks_per_node = 512;   // --max-ranks-per-node
  int64_t max_ranks = 262144;     // --max-ranks: nodes x ranks per node
  // Ranks one worker may run: this many per CPU core or GPU it reported
  // (the larger of the two); workers that report neither are not capped
  // beyond max_ranks_per_node. --max-ranks-per-core
  int max_ranks_per_core = 4;
  size_t max_command_bytes = 64 << 10;  // --max-command-bytes: sum of argv
  size_t max_env_bytes = 64 << 10;      // --max-env-bytes: keys + values
  int max_active_jobs = 10000;          // --max-active-jobs: PENDING+RUNNING
  int max_restarts = 1000;
  // Totals over all PENDING and RUNNING jobs (CheckActiveLimits), so that
  // many jobs each within the limits above cannot add up to gigabytes.
  // Launch bytes: the coordinator held ~2.96x a job's argv + env bytes in
  // memory (issue 34: 200 jobs at 64 + 64 KiB added 75.7 MB), so 64 MiB of
  // argv and env across active jobs costs it ~190 MB at most.
  int64_t max_active_launch_bytes = int64_t{64} << 20;  // --max-active-launch-bytes
  // Ranks: four jobs of the largest size above (4 x 131,072).
  int64_t max_active_ranks = 524288;  // --max-active-ranks
};

// What the PENDING and RUNNING jobs hold in total.
struct ActiveTotals {
  int64_t jobs = 0;
  int64_t launch_bytes = 0;  // CommandBytes + EnvBytes
  int64_t ranks = 0;         // RanksOf
  void Add(const JobSpec& spec);
};

// The ranks a job counts for in ActiveTotals: launch.nodes x
// launch.ranks_per_node, where a 0 (left to the coordinator) counts as 1.
int64_t RanksOf(const JobSpec& spec);

// Totals over the entries of `jobs` (a map of id -> control::JobInfo) for
// which `is_active(info)` holds.
template <typename Jobs, typename IsActive>
ActiveTotals SumActive(const Jobs& jobs, IsActive is_active) {
  ActiveTotals totals;
  for (const auto& [id, info] : jobs) {
    if (is_active(info)) totals.Add(info.spec());
  }
  return totals;
}

// ResourceExhausted (retry once jobs end) when admitting `spec` next to
// `active` would exceed max_active_launch_bytes or max_active_ranks; the
// message names the limit, its flag, the job's own amount and the current
// totals.
Status CheckActiveLimits(const JobSpec& spec, const ActiveTotals& active,
                         const JobLimits& limits);

// Bytes of launch.command (sum of its strings) and launch.env (keys and
// values).
size_t CommandBytes(const JobLaunch& launch);
size_t EnvBytes(const JobLaunch& launch);

// InvalidArgument naming the field, its value, the limit and the flag that
// sets it when `spec` exceeds `limits` (or has negative sizes).
Status CheckJobLimits(const JobSpec& spec, const JobLimits& limits);

// InvalidArgument unless a worker with `probe` can run `ranks` ranks of one
// job: ranks <= max_ranks_per_node and ranks <= max_ranks_per_core x
// max(cpu_cores, gpus) when the probe reports either.
Status CheckNodeCapacity(int ranks, const control::WorkerInfo& worker,
                         const JobLimits& limits);

// The heartbeat reply that launches a node's ranks carries every rank's
// argv, environment and plan: InvalidArgument when `ranks` of them would not
// fit in one control frame (control::kMaxFrameBytes), so the worker could
// never receive its orders.
Status CheckLaunchOrderSize(const JobSpec& spec, int ranks,
                            size_t plan_json_bytes);

}  // namespace strata::coordinator
