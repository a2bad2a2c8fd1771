#include "planner/placement.h"

#include <map>
#include <set>

#include "gtest/gtest.h"
#include "planner/model.h"
#include "planner/search.h"
#include "topology/cluster.h"

namespace strata::planner {
namespace {

StatusOr<PlanReport> Plan(const char* model, const char* cluster, int gpus,
                          int batch, int top = 3) {
  PlanRequest req;
  req.model = *LoadModel(model);
  req.cluster = *topology::LoadCluster(cluster);
  req.gpus = gpus;
  req.job.set_global_batch(batch);
  req.top_k = top;
  return PlanJob(req);
}

// Checks that `pl` is a bijection of ranks onto GPUs and that every group
// kind partitions the ranks consistently with the coordinates.
void CheckConsistent(const strata::Plan& plan, int gpus_per_node) {
  const Placement& pl = plan.placement();
  const int n = plan.tp() * plan.pp() * plan.dp() * plan.cp();
  ASSERT_EQ(pl.ranks_size(), n);
  std::set<std::pair<int, int>> gpus;
  std::map<int, RankPlacement> by_rank;
  for (const RankPlacement& r : pl.ranks()) {
    EXPECT_TRUE(gpus.insert({r.node(), r.local_gpu()}).second)
        << "two ranks on node " << r.node() << " gpu " << r.local_gpu();
    EXPECT_LT(r.local_gpu(), gpus_per_node);
    by_rank[r.rank()] = r;
  }
  std::map<std::string, int> members;
  for (const Group& g : pl.groups()) {
    members[g.kind()] += g.ranks_size();
    for (int r : g.ranks()) {
      const RankPlacement& a = by_rank[g.ranks(0)];
      const RankPlacement& b = by_rank[r];
      // Members differ only in the group's own coordinate.
      const std::map<std::string, std::pair<int, int>> coords = {
          {"tp", {a.tp_rank(), b.tp_rank()}},
          {"cp", {a.cp_rank(), b.cp_rank()}},
          {"dp", {a.dp_rank(), b.dp_rank()}},
          {"pp", {a.pp_rank(), b.pp_rank()}}};
      for (const auto& [kind, ab] : coords) {
        if (kind != g.kind()) {
          EXPECT_EQ(ab.first, ab.second) << kind << " of rank " << r;
        }
      }
    }
  }
  for (const char* kind : {"tp", "cp", "dp", "pp"}) {
    EXPECT_EQ(members[kind], n) << kind;  // every rank in exactly one group
  }
  int layers = 0;
  for (const StageInfo& s : pl.stages()) layers += s.num_layers();
  int want = 0;
  for (int l : plan.layers_per_stage()) want += l;
  EXPECT_EQ(layers, want);
}

TEST(PlacementTest, TpGroupsNeverCrossANode) {
  struct Case {
    const char* model;
    const char* cluster;
    int gpus, batch;
  } cases[] = {{"llama3-70b", "dgx-h100", 64, 256},
               {"gpt3-175b", "dgx-a100", 1024, 1536},
               {"llama3-8b", "h100-roce", 128, 512},
               {"gpt-39.1b", "frontier-mi250x", 256, 1024}};
  for (const Case& c : cases) {
    auto report = Plan(c.model, c.cluster, c.gpus, c.batch);
    ASSERT_TRUE(report.ok()) << c.model << ": " << report.status();
    const strata::Plan& best = report->plans(0);
    CheckConsistent(best, 8);
    std::map<int, int> node_of;
    for (const RankPlacement& r : best.placement().ranks()) {
      node_of[r.rank()] = r.node();
    }
    for (const Group& g : best.placement().groups()) {
      if (g.kind() != "tp") continue;
      for (int r : g.ranks()) {
        EXPECT_EQ(node_of[r], node_of[g.ranks(0)])
            << c.model << " tp group " << g.index() << " crosses nodes";
      }
    }
  }
}

TEST(PlacementTest, HeteroClusterStagesNeverMixNicTypes) {
  for (const char* model : {"llama3-8b", "llama3-70b", "gpt3-175b"}) {
    for (int gpus : {64, 256, 512}) {
      auto report = Plan(model, "hetero-ib-roce", gpus, 512, 5);
      ASSERT_TRUE(report.ok())
          << model << " " << gpus << ": " << report.status();
      const strata::Plan& best = report->plans(0);
      CheckConsistent(best, 8);
      std::set<std::string> stage_types;
      for (const StageInfo& s : best.placement().stages()) {
        EXPECT_NE(s.nic_type(), "mixed")
            << model << " on " << gpus << " GPUs: stage " << s.pp_rank();
        stage_types.insert(s.nic_type());
      }
      // Half the GPUs are on each fabric, so both types carry stages.
      EXPECT_EQ(stage_types.size(), 2u) << model << " " << gpus;
      for (const Group& g : best.placement().groups()) {
        if (g.kind() == "dp" || g.kind() == "tp") {
          EXPECT_NE(g.nic_type(), "mixed");
        }
      }
    }
  }
}

TEST(PlacementTest, SlowerFabricGetsNoMoreLayersPerStage) {
  // Holmes: stages on the slower RoCE nodes spend longer in gradient
  // all-reduce, so the speed-balanced split gives them no more layers.
  auto report = Plan("llama3-70b", "hetero-ib-roce", 512, 512, 1);
  ASSERT_TRUE(report.ok()) << report.status();
  const strata::Plan& best = report->plans(0);
  int ib = 0, roce = 0, ib_stages = 0, roce_stages = 0;
  for (const StageInfo& s : best.placement().stages()) {
    if (s.pp_rank() == 0 || s.pp_rank() == best.pp() - 1) continue;
    (s.nic_type() == "ib" ? ib : roce) += s.num_layers();
    ++(s.nic_type() == "ib" ? ib_stages : roce_stages);
  }
  if (ib_stages > 0 && roce_stages > 0) {
    EXPECT_GE(static_cast<double>(ib) / ib_stages,
              static_cast<double>(roce) / roce_stages);
  }
}

TEST(PlacementTest, StagesStayUnderOneLeafWhenTheClusterHasSpareNodes) {
  // Leaves of 4 nodes with 3:1 uplinks; stages of 3 nodes. Contiguous
  // placement would split stages 1 and 2 across leaves; MegaScale-style
  // packing leaves one node per leaf idle instead.
  PlanRequest req;
  req.model = *LoadModel("gpt-18.4b");
  req.cluster = *topology::LoadCluster("dgx-a100");
  req.cluster.clear_num_nodes();
  req.cluster.mutable_network()->set_nodes_per_leaf(4);
  req.cluster.mutable_network()->set_oversubscription(3);
  req.gpus = 96;
  req.job.set_global_batch(96);
  PlanConstraints* fix = req.job.mutable_constraints();
  fix->set_tp(8);
  fix->set_dp(3);
  fix->set_pp(4);
  auto report = PlanJob(req);
  ASSERT_TRUE(report.ok()) << report.status();
  const strata::Plan& best = report->plans(0);
  CheckConsistent(best, 8);
  for (const StageInfo& s : best.placement().stages()) {
    ASSERT_EQ(s.nodes_size(), 3);
    for (int n : s.nodes()) EXPECT_EQ(n / 4, s.nodes(0) / 4) << s.pp_rank();
    EXPECT_EQ(s.nodes(0), 4 * s.pp_rank());
  }
  // On a full cluster with no spare nodes the layout stays contiguous.
  req.cluster.set_num_nodes(12);
  report = PlanJob(req);
  ASSERT_TRUE(report.ok()) << report.status();
  EXPECT_EQ(report->plans(0).placement().stages(1).nodes(0), 3);
}

}  // namespace
}  // namespace strata::planner
