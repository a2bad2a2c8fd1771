// Heterogeneous devices (docs/planner.md "Heterogeneous devices"): a cluster
// mixing A100 and H100 nodes, per-node speed factors, uneven layer splits
// that balance stage times, and how --emit megatron expresses them.
#include <numeric>
#include <string>

#include "gtest/gtest.h"
#include "planner/emit.h"
#include "planner/model.h"
#include "planner/search.h"
#include "topology/cluster.h"

namespace strata::planner {
namespace {

// 4 DGX H100 nodes, the last two replaced by DGX A100s (same NICs).
ClusterSpec MixedCluster() {
  ClusterSpec c = *topology::LoadCluster("dgx-h100");
  c.set_num_nodes(4);
  NodeOverride* o = c.add_overrides();
  o->set_first_node(2);
  o->set_num_nodes(2);
  *o->mutable_gpu() = topology::LoadCluster("dgx-a100")->gpu();
  return c;
}

PlanRequest Request(const ClusterSpec& cluster) {
  PlanRequest req;
  req.model = *LoadModel("llama3-8b");
  req.cluster = cluster;
  req.gpus = 32;
  req.job.set_global_batch(64);
  req.job.set_seq_length(8192);
  // One pipeline stage per node: two H100 stages, two A100 stages.
  PlanConstraints* fix = req.job.mutable_constraints();
  fix->set_tp(8);
  fix->set_pp(4);
  fix->set_vpp(1);
  fix->set_micro_batch(1);
  return req;
}

TEST(HeteroTest, FasterStagesGetMoreLayersAndBeatTheEvenSplit) {
  PlanRequest req = Request(MixedCluster());
  auto balanced = PlanJob(req);
  ASSERT_TRUE(balanced.ok()) << balanced.status();
  const Plan& b = balanced->plans(0);
  ASSERT_EQ(b.layers_per_stage_size(), 4);
  EXPECT_EQ(std::accumulate(b.layers_per_stage().begin(),
                            b.layers_per_stage().end(), 0),
            32);
  // Stages 0-1 run on H100 (3.2x the A100's BF16 peak), 2-3 on A100.
  for (int h : {0, 1}) {
    for (int a : {2, 3}) {
      EXPECT_GT(b.layers_per_stage(h), b.layers_per_stage(a))
          << "stage " << h << " vs " << a;
    }
  }
  ASSERT_TRUE(b.has_placement());
  EXPECT_EQ(b.placement().stages(0).nodes(0), 0);
  EXPECT_EQ(b.placement().stages(3).nodes(0), 3);

  req.job.mutable_constraints()->set_even_layers(true);
  auto even = PlanJob(req);
  ASSERT_TRUE(even.ok()) << even.status();
  for (int l : even->plans(0).layers_per_stage()) EXPECT_EQ(l, 8);
  // The even split waits for the A100 stages; balancing saves > 20%.
  EXPECT_LT(b.step_time_s(), 0.8 * even->plans(0).step_time_s());
}

TEST(HeteroTest, NodeSpeedFactorsShiftLayersOffTheSlowNode) {
  ClusterSpec cluster = *topology::LoadCluster("dgx-h100");
  PlanRequest req = Request(cluster);
  auto same = PlanJob(req);
  ASSERT_TRUE(same.ok()) << same.status();

  NodeSpeed* slow = req.job.add_node_speed();
  slow->set_node(2);
  slow->set_speed(0.5);
  auto report = PlanJob(req);
  ASSERT_TRUE(report.ok()) << report.status();
  const Plan& p = report->plans(0);
  // The slow node's stage gets the fewest layers, and the step is faster
  // than with 8 layers on every stage.
  int slow_stage = -1;
  for (const StageInfo& s : p.placement().stages()) {
    if (s.nodes(0) == 2) slow_stage = s.pp_rank();
  }
  ASSERT_GE(slow_stage, 0);
  EXPECT_LT(p.layers_per_stage(slow_stage),
            same->plans(0).layers_per_stage(slow_stage));
  for (int i = 0; i < 4; ++i) {
    if (i != slow_stage) {
      EXPECT_LT(p.layers_per_stage(slow_stage), p.layers_per_stage(i));
    }
  }
  req.job.mutable_constraints()->set_even_layers(true);
  auto slow_even = PlanJob(req);
  ASSERT_TRUE(slow_even.ok());
  EXPECT_LT(p.step_time_s(), slow_even->plans(0).step_time_s());

  // A node outside the cluster is an error naming the field.
  req.job.mutable_node_speed(0)->set_node(7);
  auto bad = PlanJob(req);
  ASSERT_EQ(bad.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(std::string(bad.status().message()).find("node_speed[0].node"),
            std::string::npos);
  req.job.mutable_node_speed(0)->set_node(2);
  req.job.mutable_node_speed(0)->set_speed(0);
  EXPECT_EQ(PlanJob(req).status().code(), absl::StatusCode::kInvalidArgument);
}

// Every split, e.g. two fast stages then two slow ones, is said to
// Megatron-LM with --pipeline-model-parallel-layout (issue 36; before,
// only first/last splits could be, the others were a comment).
TEST(HeteroTest, MegatronExpressesAnySplitAsALayout) {
  ModelSpec model = *LoadModel("llama3-8b");
  Plan plan;
  plan.set_tp(8);
  plan.set_pp(4);
  plan.set_vpp(1);
  plan.set_cp(1);
  for (int l : {7, 9, 9, 7}) plan.add_layers_per_stage(l);
  std::string flags = EmitMegatron(plan, model);
  EXPECT_NE(flags.find("--pipeline-model-parallel-layout "
                       "'Ettttttt|(ttttttttt|)*2tttttttL'"),
            std::string::npos)
      << flags;
  plan.clear_layers_per_stage();
  for (int l : {10, 10, 6, 6}) plan.add_layers_per_stage(l);
  flags = EmitMegatron(plan, model);
  EXPECT_NE(flags.find("--pipeline-model-parallel-layout "
                       "'Etttttttttt|tttttttttt|tttttt|ttttttL'"),
            std::string::npos)
      << flags;
  // The even split is Megatron's default: no layout.
  plan.clear_layers_per_stage();
  for (int l : {8, 8, 8, 8}) plan.add_layers_per_stage(l);
  flags = EmitMegatron(plan, model);
  EXPECT_EQ(flags.find("--pipeline-model-parallel-layout"), std::string::npos)
      << flags;
}

}  // namespace
}  // namespace strata::planner
