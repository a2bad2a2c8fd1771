#include "placement/layout.h"

#include <algorithm>
#include <set>

#include "absl/strings/str_cat.h"

namespace strata::placement {

StatusOr<Placement> FixedPlacement(const Sizes& s,
                                   const std::vector<int>& node_of_rank,
                                   const std::string& nic_type) {
  if (s.tp < 1 || s.cp < 1 || s.dp < 1 || s.pp < 1 ||
      static_cast<int64_t>(node_of_rank.size()) != s.Ranks()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "cannot place tp=", s.tp, " pp=", s.pp, " dp=", s.dp, " cp=", s.cp,
        " on ", node_of_rank.size(), " ranks"));
  }
  int nodes = 0;
  for (int r = 0; r < static_cast<int>(node_of_rank.size()); ++r) {
    if (node_of_rank[r] < 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("rank ", r, " is on node ", node_of_rank[r]));
    }
    nodes = std::max(nodes, node_of_rank[r] + 1);
  }
  Placement pl;
  pl.set_order("tp-cp-dp-pp");
  std::vector<int> next_local(nodes);  // node -> its ranks placed so far
  for (int r = 0; r < static_cast<int>(node_of_rank.size()); ++r) {
    const int node = node_of_rank[r];
    const Coord c = CoordOf(s, r);
    RankPlacement* p = pl.add_ranks();
    p->set_rank(r);
    p->set_node(node);
    p->set_local_gpu(next_local[node]++);
    p->set_tp_rank(c.tp);
    p->set_cp_rank(c.cp);
    p->set_dp_rank(c.dp);
    p->set_pp_rank(c.pp);
  }
  AddGroups(s, &pl);
  // Stage p holds ranks [p n, (p + 1) n), n = tp cp dp (PP is outermost).
  const int64_t stage_ranks = s.Ranks() / s.pp;
  for (int stage = 0; stage < s.pp; ++stage) {
    StageInfo* st = pl.add_stages();
    st->set_pp_rank(stage);
    st->set_num_layers(0);
    std::set<int> nodes;
    for (int64_t r = stage * stage_ranks; r < (stage + 1) * stage_ranks; ++r) {
      nodes.insert(node_of_rank[r]);
    }
    for (int n : nodes) st->add_nodes(n);
  }
  if (!nic_type.empty()) {
    for (Group& g : *pl.mutable_groups()) g.set_nic_type(nic_type);
    for (StageInfo& st : *pl.mutable_stages()) st.set_nic_type(nic_type);
  }
  return pl;
}

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
  const Sizes s{.tp = tp, .cp = cp, .dp = dp, .pp = pp};
  if (tp < 1 || pp < 1 || dp < 1 || cp < 1 || ranks_per_node < 1 ||
      s.Ranks() % ranks_per_node != 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("cannot place tp=", tp, " pp=", pp, " dp=", dp, " cp=", cp,
                     " on nodes of ", ranks_per_node, " ranks"));
  }
  std::vector<int> node_of(s.Ranks());
  for (int r = 0; r < static_cast<int>(node_of.size()); ++r) {
    node_of[r] = r / ranks_per_node;
  }
  return FixedPlacement(s, node_of);
}

StatusOr<Placement> GroupPlacement(const RankEnv& env) {
  return UniformPlacement(env.tp, env.pp, env.dp, env.cp, env.local_world_size);
}

StatusOr<Plan> PlanForNodes(const std::vector<int>& node_of_rank, int tp,
                            int pp, int cp) {
  const int world = static_cast<int>(node_of_rank.size());
  const Sizes s{.tp = tp,
                .cp = cp,
                .dp = DataParallelSize(world, tp, pp, cp),
                .pp = pp};
  if (s.dp == 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "world size ", world,
        " is not divisible by tp*pp*cp = ", static_cast<int64_t>(tp) * pp * cp,
        " (tp ", tp, " pp ", pp, " cp ", cp, ")"));
  }
  return FixedPlan(s, node_of_rank);
}

StatusOr<Plan> FixedPlan(const Sizes& s, const std::vector<int>& node_of_rank,
                         const std::string& nic_type) {
  Plan plan;
  plan.set_tp(s.tp);
  plan.set_pp(s.pp);
  plan.set_dp(s.dp);
  plan.set_cp(s.cp);
  plan.set_vpp(1);
  plan.set_ep(1);
  plan.set_etp(1);
  ASSIGN_OR_RETURN(*plan.mutable_placement(),
                   FixedPlacement(s, node_of_rank, nic_type));
  return plan;
}

}  // namespace strata::placement
