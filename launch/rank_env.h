// The rank environment strata-exec gives every process it starts (the
// placement contract, docs/placement.md). Pure functions: no MPI, no sockets,
// so the whole contract is unit-tested (tests/unit/launch/rank_env_test.cc).
#pragma once

#include <map>
#include <string>
#include <vector>

#include "common/status.h"

namespace strata::launch {

// Parallel sizes from --tp --pp --cp; dp is derived from the world size.
struct ParallelSizes {
  int tp = 1, pp = 1, dp = 1, cp = 1;
};

// DP = world / (tp * pp * cp). InvalidArgument (naming the flags and the
// world size) when a size is < 1 or the product does not divide the world.
StatusOr<ParallelSizes> DeriveParallelSizes(int world_size, int tp, int pp,
                                            int cp);

// Where ranks live. Nodes are numbered in order of their lowest rank, local
// ranks in rank order within a node (what torchrun gives for contiguous
// blocks, and well defined for any interleaving).
struct Locality {
  int node_rank = 0;         // NODE_RANK / GROUP_RANK
  int num_nodes = 1;         // GROUP_WORLD_SIZE
  int local_rank = 0;        // LOCAL_RANK
  int local_world_size = 1;  // LOCAL_WORLD_SIZE
};

// `node_of_rank[r]` is rank r's node name (hostname or --node-name).
// Precondition: 0 <= rank < node_of_rank.size().
Locality ComputeLocality(const std::vector<std::string>& node_of_rank,
                         int rank);

// Whether each node holds one contiguous block of ranks and all blocks have
// the same size (mpirun's default by-slot mapping with equal slots per
// node). strata's runtime (Runtime::FromEnv) assumes this layout; torch
// scripts do not need it.
bool NodesAreContiguousEqualBlocks(
    const std::vector<std::string>& node_of_rank);

// Everything the environment is built from; each rank computes the same
// job-wide fields (they come from rank 0 through a broadcast).
struct RankEnvInputs {
  int rank = 0;
  int world_size = 1;
  Locality locality;
  ParallelSizes sizes;
  std::string master_addr;  // rank 0's address, reachable by every rank
  std::string node_name;    // STRATA_NODE_NAME: this rank's node
  // STRATA_NODE_ADDR: the address this rank's transport binds and
  // advertises; loopback only when every rank runs on one host.
  std::string node_addr;
  int master_port = 0;  // free port for torch's own TCPStore
  std::string store;    // STRATA_STORE, e.g. "tcp://10.0.0.1:29400"
  std::string job_id;
  std::string ckpt_uri;  // empty: STRATA_CKPT_URI is not set
};

// The variables strata-exec sets (torchrun's set, strata's STRATA_*). The
// TP/CP/DP/PP ranks follow the planner's tp-cp-dp-pp order
// (planner::CoordOf, the same coordinates BuildPlanGroups reads from a
// placement), so the groups a rank builds match a planned placement.
std::map<std::string, std::string> RankVariables(const RankEnvInputs& in);

// The child's environment: `inherited` ("NAME=value" strings, e.g. environ)
// minus the variables that tie a process to the mpirun job (OMPI_*, PMIX_*:
// the command is not that MPI process; if it calls MPI_Init it starts as a
// singleton) and stale placement variables strata-exec cannot fill
// (STRATA_PLAN, STRATA_TELEMETRY), plus `vars`, which override.
std::vector<std::string> ChildEnvironment(
    const std::vector<std::string>& inherited,
    const std::map<std::string, std::string>& vars);

}  // namespace strata::launch
