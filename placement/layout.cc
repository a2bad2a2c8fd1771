#include "placement/layout.h"

#include "absl/strings/str_cat.h"
#include "planner/candidate.h"
#include "planner/network.h"
#include "planner/placement.h"

namespace strata::placement {

StatusOr<std::vector<int>> NodeOfRanks(const RankEnv& env) {
  const int block = env.local_world_size;
  if (block < 1 || env.world_size % block != 0) {
    return absl::InvalidArgumentError(
        absl::StrCat(kLocalWorldSize, "=", block, " does not divide ",
                     kWorldSize, "=", env.world_size));
  }
  const char* wrong = env.node_rank != env.rank / block    ? kNodeRank
                      : env.local_rank != env.rank % block ? kLocalRank
                                                           : nullptr;
  if (wrong != nullptr) {
    return absl::InvalidArgumentError(absl::StrCat(
        wrong, " of ", kRank, "=", env.rank, " is ",
        wrong == kNodeRank ? env.node_rank : env.local_rank,
        ", but strata's runtime needs each node's ranks in one contiguous "
        "block of ",
        kLocalWorldSize, "=", block,
        " (node RANK / LOCAL_WORLD_SIZE, local rank RANK % "
        "LOCAL_WORLD_SIZE), e.g. mpirun's default by-slot mapping"));
  }
  std::vector<int> node_of(env.world_size);
  for (int r = 0; r < env.world_size; ++r) node_of[r] = r / block;
  return node_of;
}

StatusOr<Placement> UniformPlacement(int tp, int pp, int dp, int cp,
                                     int ranks_per_node) {
  planner::Candidate c;
  c.tp = tp;
  c.pp = pp;
  c.dp = dp;
  c.cp = cp;
  if (tp < 1 || pp < 1 || dp < 1 || cp < 1 || ranks_per_node < 1 ||
      c.Gpus() % ranks_per_node != 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("cannot place tp=", tp, " pp=", pp, " dp=", dp, " cp=", cp,
                     " on nodes of ", ranks_per_node, " ranks"));
  }
  // A uniform network of whole nodes: node j is the j-th block of ranks.
  ClusterSpec cluster;
  cluster.set_gpus_per_node(ranks_per_node);
  cluster.set_num_nodes(static_cast<int>(c.Gpus() / ranks_per_node));
  std::vector<topology::NodeInfo> nodes(cluster.num_nodes());
  for (int j = 0; j < cluster.num_nodes(); ++j) nodes[j].index = j;
  const planner::Network net(cluster, std::move(nodes));
  return planner::BuildPlacement(c, {}, net);
}

StatusOr<Placement> GroupPlacement(const RankEnv& env) {
  return UniformPlacement(env.tp, env.pp, env.dp, env.cp, env.local_world_size);
}

}  // namespace strata::placement
