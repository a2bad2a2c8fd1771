#include "planner/placement.h"

#include <set>

#include "placement/layout.h"
#include "topology/cluster.h"

namespace strata::planner {

namespace {

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
  const int gpn = net.gpus_per_node();
  const int64_t stage_ranks = static_cast<int64_t>(c.tp) * c.cp * c.dp;
  const int stage_nodes = static_cast<int>((stage_ranks + gpn - 1) / gpn);
  std::vector<int> node_of(c.Gpus());
  for (int64_t r = 0; r < c.Gpus(); ++r) {
    node_of[r] = net.PhysicalNode(r / gpn, stage_nodes);
  }
  StatusOr<Placement> fixed = placement::FixedPlacement(
      {.tp = c.tp, .cp = c.cp, .dp = c.dp, .pp = c.pp}, node_of);
  STRATA_CHECK(fixed.ok());  // a candidate's sizes are >= 1
  Placement pl = *std::move(fixed);
  for (Group& g : *pl.mutable_groups()) g.set_nic_type(GroupNicType(g, net));
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
    StageInfo* st = pl.mutable_stages(s);
    st->set_num_layers(s < static_cast<int>(layers.size()) ? layers[s] : 0);
    std::set<std::string> types;
    for (int64_t r = s * stage_ranks; r < (s + 1) * stage_ranks; r += 1) {
      types.insert(topology::NicTypeName(net.nodes()[r / gpn].nic_type));
    }
    st->set_nic_type(types.size() == 1 ? *types.begin() : "mixed");
  }
  return pl;
}

}  // namespace strata::planner
