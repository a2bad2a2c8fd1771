// The name a worker registers under (its node identity), so workers started
// by `srun` in deploy/slurm/strata.sbatch need no --node-name.
#pragma once

#include <functional>
#include <string>

#include "common/status.h"

namespace strata::worker {

// Looks an environment variable up; nullptr when unset.
using EnvLookup = std::function<const char*(const char*)>;

// In order of precedence:
//   1. `flag` (--node-name) when non-empty;
//   2. under Slurm: SLURMD_NODENAME (the node's name in slurm.conf, set by
//      slurmd in every task it starts), else SLURM_NODEID (the node's index
//      in the job) as "slurm-node-<id>";
//   3. `hostname`.
// InvalidArgument, naming the variable, when SLURM_NODEID is set but is not
// a non-negative integer. Empty variables count as unset.
StatusOr<std::string> NodeIdentity(const std::string& flag,
                                   const std::string& hostname,
                                   const EnvLookup& getenv_fn);

}  // namespace strata::worker
