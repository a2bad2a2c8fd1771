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

// Defaults sized for the largest documented job (16,384 ranks) with room to
// spare; each is a strata-coordinator flag (named in the error messages).
struct JobLimits {
  int max_nodes = 4096;          // --max-nodes
  int max_ranks_per_node = 512;  // --max-ranks-per-node
  int64_t max_ranks = 65536;     // --max-ranks: nodes x ranks per node
  // Ranks one worker may run: this many per CPU core or GPU it reported
  // (the larger of the two); workers that report neither are not capped
  // beyond max_ranks_per_node. --max-ranks-per-core
  int max_ranks_per_core = 4;
  size_t max_command_bytes = 64 << 10;  // --max-command-bytes: sum of argv
  size_t max_env_bytes = 64 << 10;      // --max-env-bytes: keys + values
  int max_active_jobs = 10000;          // --max-active-jobs: PENDING+RUNNING
  int max_restarts = 1000;
};

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
