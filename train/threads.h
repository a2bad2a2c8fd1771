// How many BLAS threads a rank of strata-train uses (docs/train.md,
// "Threads"):
//  1. STRATA_THREADS_PER_RANK when set to an integer >= 1 (the job's env);
//  2. otherwise the CPUs this process may run on (its scheduler affinity,
//     which a cpuset, taskset or container limits) divided by the ranks
//     that share them on this node (LOCAL_WORLD_SIZE), rounded down, at
//     least 1.
// OMP_NUM_THREADS is not read: the coordinator sets it to 1 for every job
// as a launcher default (as torchrun does), which would pin this to 1.
#pragma once

namespace strata::train {

// CPUs in this process's affinity mask (at least 1).
int AffinityCpus();

// The rule above for `local_ranks` ranks sharing this process's CPUs.
int ThreadsPerRank(int local_ranks);

}  // namespace strata::train
