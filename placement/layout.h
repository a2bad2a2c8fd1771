// The layout strata's runtime builds its transport and groups from: each
// node's ranks are one contiguous block of LOCAL_WORLD_SIZE ranks (what the
// coordinator places and mpirun's default by-slot mapping gives), and the
// groups are the planner's (planner::BuildPlacement) for the sizes.
#pragma once

#include <vector>

#include "common/status.h"
#include "placement/rank_env.h"
#include "proto/plan.pb.h"

namespace strata::placement {

// Node index of every rank: ranks [n L, (n + 1) L) on node n, L =
// env.local_world_size. InvalidArgument naming NODE_RANK or LOCAL_RANK when
// env's own node or local rank says otherwise (e.g. mpirun --map-by node).
StatusOr<std::vector<int>> NodeOfRanks(const RankEnv& env);

// The placement of tp x pp x dp x cp ranks in tp-cp-dp-pp order on nodes of
// `ranks_per_node` consecutive ranks, with every group listed (the input of
// comm::BuildPlanGroups). InvalidArgument when a size is < 1 or
// `ranks_per_node` does not divide the ranks.
StatusOr<Placement> UniformPlacement(int tp, int pp, int dp, int cp,
                                     int ranks_per_node);

// UniformPlacement of env's sizes and local world size.
StatusOr<Placement> GroupPlacement(const RankEnv& env);

}  // namespace strata::placement
