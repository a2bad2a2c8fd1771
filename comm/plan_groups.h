// Process groups from a plan's placement (docs/comm.md): each rank builds
// its TP, CP, DP and PP groups. Two ranks share a group of some kind only if
// they differ in exactly that coordinate, so every pair of ranks belongs to
// at most one group; over a world transport the groups' traffic therefore
// never interleaves on a pair's stream, and building them is local (no
// rendezvous or barrier per group).
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "comm/backend.h"
#include "comm/process_group.h"
#include "proto/plan.pb.h"

namespace strata::comm {

struct PlanGroups {
  std::unique_ptr<Backend> tp, cp, dp, pp;
  // Index of this rank's group of each kind in Placement.groups order.
  int tp_index = -1, cp_index = -1, dp_index = -1, pp_index = -1;
  // The world transport the groups are views of, when they are
  // (BuildPlanGroups over a transport); null for mpi and nccl groups. Its
  // LinkCounters() name peers by world rank.
  std::shared_ptr<Transport> world;
};

// Makes one group: `kind` ("tp", "cp", "dp" or "pp"), its index among the
// placement's groups of that kind, its members as world ranks (group rank =
// position) and each member's node.
using GroupMaker = std::function<StatusOr<std::unique_ptr<Backend>>(
    const std::string& kind, int index, const std::vector<int>& members,
    const std::vector<int>& node_of)>;

// Finds this rank's (`rank`, world rank = placement rank) group of each kind
// and calls `make` for them in the fixed order tp, cp, dp, pp on every rank,
// so makers that are collective (MPI_Comm_split, NCCL init) line up.
// InvalidArgument when the placement does not contain this rank in exactly
// one group of each kind, or a rank is outside [0, world_size).
StatusOr<std::unique_ptr<PlanGroups>> BuildPlanGroups(
    int rank, int world_size, const Placement& placement,
    const GroupMaker& make);

// The groups as ProcessGroups over views of one world transport (world
// rank = placement rank), which each group keeps alive. `node_of` of each
// group comes from the placement's nodes, so the tuner sees which members
// share a node.
StatusOr<std::unique_ptr<PlanGroups>> BuildPlanGroups(
    std::shared_ptr<Transport> world, const Placement& placement,
    const GroupOptions& base_options);

}  // namespace strata::comm
