// The host-bound MoE expert block (planner/moe_host.h): each term moves the
// prediction in the direction its mechanism says, and only where it says.
#include "planner/moe_host.h"

#include <string>

#include "gtest/gtest.h"
#include "planner/model.h"
#include "planner/search.h"
#include "topology/cluster.h"

namespace strata::planner {
namespace {

TEST(MoeHostTest, HostTimeScalesWithLocalExpertsAndFp8Casts) {
  EXPECT_DOUBLE_EQ(MoeHostForwardS(16, false), 16 * 2 * kMoeHostOpS);
  EXPECT_DOUBLE_EQ(MoeHostForwardS(16, true), 2 * MoeHostForwardS(16, false));
  EXPECT_DOUBLE_EQ(MoeHostForwardS(1, false) * 4, MoeHostForwardS(4, false));
  // The forward block waits for the larger of GPU and host.
  EXPECT_DOUBLE_EQ(MoeBlockForwardS(1e-3, 3e-3), 3e-3);
  EXPECT_DOUBLE_EQ(MoeBlockForwardS(5e-3, 3e-3), 5e-3);
  // The backward has no synchronisation: only twice the host time beyond
  // the layer's backward GPU time is exposed.
  EXPECT_DOUBLE_EQ(MoeBackwardHostExposedS(3e-3, 1e-3), 4e-3);
  EXPECT_DOUBLE_EQ(MoeBackwardHostExposedS(3e-3, 5e-3), 0.0);
}

double StepSeconds(const std::string& model, int gpus, int gbs, int mbs, int pp,
                   int ep) {
  PlanRequest req;
  req.model = *LoadModel(model);
  req.cluster = *topology::LoadCluster("dgx-h100");
  req.gpus = gpus;
  req.top_k = 1;
  req.with_placement = false;
  req.job.set_global_batch(gbs);
  req.job.set_seq_length(4096);
  PlanConstraints* f = req.job.mutable_constraints();
  f->set_tp(1);
  f->set_pp(pp);
  f->set_cp(1);
  f->set_micro_batch(mbs);
  f->set_precision(Precision::bf16);
  f->set_recompute(Recompute::full);
  if (req.model.num_experts() > 0) {
    f->set_ep(ep);
    f->set_etp(1);
  }
  f->set_zero_stage(1);
  f->set_distributed_optimizer(true);
  auto r = PlanJob(req);
  EXPECT_TRUE(r.ok()) << r.status();
  return r.ok() ? r->plans(0).step_time_s() : 0;
}

// More local experts per rank (smaller ep) mean more host work per MoE
// layer, which a small micro-batch cannot hide behind GPU work.
TEST(MoeHostTest, SmallExpertBlocksBecomeHostBound) {
  // gpt-oss-120b on 64 GPUs, pp 4: ep 8 -> 16 local experts, ep 16 -> 8.
  const double ep8 = StepSeconds("gpt-oss-120b", 64, 1280, 1, 4, 8);
  const double ep16 = StepSeconds("gpt-oss-120b", 64, 1280, 1, 4, 16);
  // Without the host term ep 16 is the slower (its all-to-all leaves the
  // node); with it, 16 local experts per rank cost more host time.
  EXPECT_GT(ep8, ep16);
}

// The published row the constant was calibrated on ([B26]: 13.67 s per
// step, from 5,993 tokens/s/GPU) and the one it predicts (qwen3-30b-a3b,
// published_moe_fp8_test) stay within the 0.2 points the published test
// uses; here the step itself: within 1% of the published step.
TEST(MoeHostTest, CalibrationRowStep) {
  PlanRequest req;
  req.model = *LoadModel("gpt-oss-120b");
  req.cluster = *topology::LoadCluster("dgx-h100");
  req.gpus = 64;
  req.top_k = 1;
  req.with_placement = false;
  req.job.set_global_batch(1280);
  req.job.set_seq_length(4096);
  PlanConstraints* f = req.job.mutable_constraints();
  f->set_tp(1);
  f->set_pp(4);
  f->set_cp(1);
  f->set_vpp(1);
  f->set_even_layers(true);
  f->set_micro_batch(1);
  f->set_precision(Precision::bf16);
  f->set_ep(8);
  f->set_etp(1);
  f->set_zero_stage(1);
  f->set_distributed_optimizer(true);
  auto r = PlanJob(req);
  ASSERT_TRUE(r.ok()) << r.status();
  const double published_step = 1280.0 * 4096 / (64 * 5993);
  EXPECT_NEAR(r->plans(0).step_time_s() / published_step, 1.0, 0.01);
}

}  // namespace
}  // namespace strata::planner
