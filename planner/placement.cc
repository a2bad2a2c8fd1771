#include "planner/placement.h"

#include <set>

#include "topology/cluster.h"

namespace strata::planner {

RankCoord CoordOf(const Candidate& c, int64_t rank) {
  RankCoord rc;
  rc.tp = static_cast<int>(rank % c.tp);
  rank /= c.tp;
  rc.cp = static_cast<int>(rank % c.cp);
  rank /= c.cp;
  rc.dp = static_cast<int>(rank % c.dp);
  rc.pp = static_cast<int>(rank / c.dp);
  return rc;
}

namespace {

int64_t RankOf(const Candidate& c, int tp, int cp, int dp, int pp) {
  return tp + static_cast<int64_t>(c.tp) *
                  (cp + static_cast<int64_t>(c.cp) *
                            (dp + static_cast<int64_t>(c.dp) * pp));
}

// NIC type shared by every member's node, or "mixed".
std::string GroupNicType(const Group& g, const Network& net) {
  const int gpn = net.gpus_per_node();
  std::string type;
  for (int r : g.ranks()) {
    std::string t = topology::NicTypeName(net.nodes()[r / gpn].nic_type);
    if (type.empty()) type = t;
    if (t != type) return "mixed";
  }
  return type;
}

}  // namespace

Placement BuildPlacement(const Candidate& c, const std::vector<int>& layers,
                         const Network& net) {
  Placement pl;
  pl.set_order("tp-cp-dp-pp");
  const int gpn = net.gpus_per_node();
  const int64_t n = c.Gpus();
  const int64_t stage_ranks = static_cast<int64_t>(c.tp) * c.cp * c.dp;
  const int stage_nodes = static_cast<int>((stage_ranks + gpn - 1) / gpn);
  for (int64_t r = 0; r < n; ++r) {
    RankCoord rc = CoordOf(c, r);
    RankPlacement* rp = pl.add_ranks();
    rp->set_rank(static_cast<int>(r));
    rp->set_node(net.PhysicalNode(r / gpn, stage_nodes));
    rp->set_local_gpu(static_cast<int>(r % gpn));
    rp->set_tp_rank(rc.tp);
    rp->set_cp_rank(rc.cp);
    rp->set_dp_rank(rc.dp);
    rp->set_pp_rank(rc.pp);
  }
  // Each kind: iterate over the other three coordinates, vary this one.
  auto add_groups = [&](const char* kind, int size, auto rank_of) {
    int index = 0;
    for (int pp = 0; pp < (std::string(kind) == "pp" ? 1 : c.pp); ++pp)
      for (int dp = 0; dp < (std::string(kind) == "dp" ? 1 : c.dp); ++dp)
        for (int cp = 0; cp < (std::string(kind) == "cp" ? 1 : c.cp); ++cp)
          for (int tp = 0; tp < (std::string(kind) == "tp" ? 1 : c.tp); ++tp) {
            Group* g = pl.add_groups();
            g->set_kind(kind);
            g->set_index(index++);
            for (int i = 0; i < size; ++i) {
              g->add_ranks(static_cast<int>(rank_of(tp, cp, dp, pp, i)));
            }
            g->set_nic_type(GroupNicType(*g, net));
          }
  };
  add_groups("tp", c.tp, [&](int, int cp, int dp, int pp, int i) {
    return RankOf(c, i, cp, dp, pp);
  });
  add_groups("cp", c.cp, [&](int tp, int, int dp, int pp, int i) {
    return RankOf(c, tp, i, dp, pp);
  });
  add_groups("dp", c.dp, [&](int tp, int cp, int, int pp, int i) {
    return RankOf(c, tp, cp, i, pp);
  });
  add_groups("pp", c.pp, [&](int tp, int cp, int dp, int, int i) {
    return RankOf(c, tp, cp, dp, i);
  });
  // MoE layers (Megatron-core parallel folding): within each stage the
  // ranks are ordered tp(etp)-ep-edp, so local index j = etp_rank + etp
  // (ep_rank + ep edp_rank). EP groups vary ep_rank, ETP groups etp_rank.
  const int64_t edp = c.ExpertDp();
  auto add_expert_groups = [&](const char* kind, bool ep_kind) {
    int index = 0;
    const int size = ep_kind ? c.ep : c.etp;
    const int other = ep_kind ? c.etp : c.ep;
    for (int s = 0; s < c.pp; ++s)
      for (int64_t e = 0; e < edp; ++e)
        for (int o = 0; o < other; ++o) {
          Group* g = pl.add_groups();
          g->set_kind(kind);
          g->set_index(index++);
          for (int i = 0; i < size; ++i) {
            const int64_t etp_r = ep_kind ? o : i, ep_r = ep_kind ? i : o;
            const int64_t j = etp_r + c.etp * (ep_r + c.ep * e);
            g->add_ranks(static_cast<int>(s * stage_ranks + j));
          }
          g->set_nic_type(GroupNicType(*g, net));
        }
  };
  if (c.ep > 1) add_expert_groups("ep", true);
  if (c.etp > 1) add_expert_groups("etp", false);
  for (int s = 0; s < c.pp; ++s) {
    StageInfo* st = pl.add_stages();
    st->set_pp_rank(s);
    st->set_num_layers(s < static_cast<int>(layers.size()) ? layers[s] : 0);
    std::set<int> nodes;
    std::set<std::string> types;
    for (int64_t r = s * stage_ranks; r < (s + 1) * stage_ranks; r += 1) {
      const auto& node = net.nodes()[r / gpn];
      nodes.insert(net.PhysicalNode(r / gpn, stage_nodes));
      types.insert(topology::NicTypeName(node.nic_type));
    }
    for (int nd : nodes) st->add_nodes(nd);
    st->set_nic_type(types.size() == 1 ? *types.begin() : "mixed");
  }
  return pl;
}

}  // namespace strata::planner
