// The idle pool as `strata status` and the dashboard show it (docs/fault.md
// "Hot spares"): alive workers that run no attempt, split into those
// reserved as some job's hot spares and those free for any job. Pure; the
// CLI and the coordinator's dashboard feed it the same two lists.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "proto/control.pb.h"

namespace strata::observe {

struct SparePool {
  std::vector<std::string> free;                  // idle, reserved by none
  std::map<std::string, std::string> reserved;    // idle worker id -> job id
  std::vector<std::string> busy;                  // alive, running an attempt
  int lost = 0;                                   // registered, not alive
};

// `jobs`: the coordinator's jobs (only PENDING and RUNNING ones reserve);
// `workers`: its registry. A worker that holds ranks (WorkerInfo.holds)
// or is a node of a running attempt is busy, whatever else it is.
SparePool ComputeSparePool(const control::JobsReply& jobs,
                           const control::ListWorkersReply& workers);

// "2 idle: 1 free [w-node-3], 1 reserved [w-node-2 for job-1]; 2 busy".
std::string DescribeSparePool(const SparePool& pool);

}  // namespace strata::observe
