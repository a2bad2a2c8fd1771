// Fixed-size placements (docs/placement.md "Placement"): where every rank
// of a job with given parallel sizes runs when nothing is planned — node,
// local GPU, coordinates (placement/order.h) and groups. The one builder is
// FixedPlacement; the coordinator's fixed-size attempts, strata-exec
// (PlanForNodes), the runtime's groups (GroupPlacement) and the planner
// (planner::BuildPlacement, which only chooses the nodes and labels NIC
// types) all use it. Pure functions.
#pragma once

#include <string>
#include <vector>

#include "common/status.h"
#include "placement/order.h"
#include "placement/rank_env.h"
#include "proto/plan.pb.h"

namespace strata::placement {

// The placement of `s` with rank r on node `node_of_rank[r]` (any node
// indices >= 0, in any order): order "tp-cp-dp-pp"; every rank at
// CoordOf(s, r), its local GPU counting its node's ranks in rank order; the
// groups of AddGroups; one stage per PP rank listing the nodes its ranks
// run on (ascending), num_layers 0. `nic_type`, when not empty, is recorded
// on every group and stage (all nodes have that NIC type). InvalidArgument
// when a size is < 1, node_of_rank does not hold s.Ranks() entries or holds
// a negative node.
StatusOr<Placement> FixedPlacement(const Sizes& s,
                                   const std::vector<int>& node_of_rank,
                                   const std::string& nic_type = "");

// Node index of every rank: ranks [n L, (n + 1) L) on node n, L =
// env.local_world_size. InvalidArgument naming NODE_RANK or LOCAL_RANK when
// env's own node or local rank says otherwise (e.g. mpirun --map-by node).
StatusOr<std::vector<int>> NodeOfRanks(const RankEnv& env);

// FixedPlacement of tp x pp x dp x cp ranks on nodes of `ranks_per_node`
// consecutive ranks (rank r on node r / ranks_per_node). InvalidArgument
// when a size is < 1 or `ranks_per_node` does not divide the ranks.
StatusOr<Placement> UniformPlacement(int tp, int pp, int dp, int cp,
                                     int ranks_per_node);

// UniformPlacement of env's sizes and local world size: the placement the
// runtime builds its groups from (comm::BuildPlanGroups).
StatusOr<Placement> GroupPlacement(const RankEnv& env);

// The plan of a fixed-size job: `s` (vpp, ep and etp 1) and
// FixedPlacement(s, node_of_rank, nic_type); the coordinator's attempts of
// jobs without a model. InvalidArgument as FixedPlacement.
StatusOr<Plan> FixedPlan(const Sizes& s, const std::vector<int>& node_of_rank,
                         const std::string& nic_type = "");

// FixedPlan of `tp` x `pp` x `cp` x (the rest) ranks with rank r on node
// `node_of_rank[r]`, for launchers without a planner (strata-exec).
// InvalidArgument when the sizes do not divide the world.
StatusOr<Plan> PlanForNodes(const std::vector<int>& node_of_rank, int tp,
                            int pp, int cp);

}  // namespace strata::placement
