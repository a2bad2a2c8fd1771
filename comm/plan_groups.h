// Process groups from a plan's placement (docs/comm.md): each rank builds
// its TP, CP, DP and PP groups as views over one world transport. Two ranks
// share a group of some kind only if they differ in exactly that
// coordinate, so every pair of ranks belongs to at most one group and the
// groups' traffic never interleaves on a pair's stream. No rendezvous or
// barrier per group: building is local and all ranks do it in parallel.
#pragma once

#include <memory>

#include "comm/process_group.h"
#include "proto/plan.pb.h"

namespace strata::comm {

struct PlanGroups {
  std::shared_ptr<Transport> world;  // outlives the groups below
  std::unique_ptr<ProcessGroup> tp, cp, dp, pp;
  // Index of this rank's group of each kind in Placement.groups order.
  int tp_index = -1, cp_index = -1, dp_index = -1, pp_index = -1;
  ~PlanGroups();  // destroys the groups before the world transport
};

// `world` connects every rank of the placement (world rank = placement
// rank). `node_of` of each group comes from the placement's nodes, so the
// tuner sees which members share a node. InvalidArgument when the placement
// does not contain this rank in exactly one group of each kind.
StatusOr<std::unique_ptr<PlanGroups>> BuildPlanGroups(
    std::shared_ptr<Transport> world, const Placement& placement,
    const GroupOptions& base_options);

}  // namespace strata::comm
