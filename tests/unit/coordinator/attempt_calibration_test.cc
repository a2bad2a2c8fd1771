// The coordinator's self-calibration (docs/planner.md "Calibration"): the
// compute scale learnt from plan checks slows the probed devices down in
// the next plan, and the plan says a calibration is applied.
#include "coordinator/jobs/attempt_plan.h"
#include "gtest/gtest.h"

namespace strata::coordinator {
namespace {

std::vector<control::WorkerInfo> CpuNodes(int n) {
  std::vector<control::WorkerInfo> nodes(n);
  for (int i = 0; i < n; ++i) {
    nodes[i].set_node_name("node-" + std::to_string(i));
    control::NodeProbe* p = nodes[i].mutable_probe();
    p->set_cpu_cores(4);
    p->set_cpu_gflops(50);
    p->set_copy_gbps(10);
    p->set_memory_bytes(16LL << 30);
  }
  return nodes;
}

TEST(AttemptCalibrationTest, KeyNamesTheDevice) {
  EXPECT_EQ(CalibrationKey(CpuNodes(1)), "calibration/cpu-core");
  auto gpu = CpuNodes(1);
  gpu[0].mutable_probe()->add_gpu_details()->set_name("H100");
  EXPECT_EQ(CalibrationKey(gpu), "calibration/H100");
}

TEST(AttemptCalibrationTest, ComputeScaleSlowsThePredictedCompute) {
  JobSpec spec;
  spec.mutable_launch()->set_model("strata-small");
  spec.mutable_launch()->set_ranks_per_node(2);
  spec.set_global_batch(16);
  spec.set_seq_length(64);
  auto base = PlanAttempt(spec, CpuNodes(1));
  ASSERT_TRUE(base.ok()) << base.status();
  PlanConstraints* fix = spec.mutable_constraints();
  fix->set_tp(base->tp());
  fix->set_pp(base->pp());
  fix->set_micro_batch(base->micro_batch());
  auto scaled = PlanAttempt(spec, CpuNodes(1), {}, 2.0);
  ASSERT_TRUE(scaled.ok()) << scaled.status();
  ASSERT_EQ(scaled->stage_compute_s_size(), base->stage_compute_s_size());
  for (int i = 0; i < base->stage_compute_s_size(); ++i) {
    EXPECT_NEAR(scaled->stage_compute_s(i) / base->stage_compute_s(i), 2.0,
                0.01);
  }
  EXPECT_GT(scaled->step_time_s(), 1.5 * base->step_time_s());

  ClusterSpec c;
  c.mutable_gpu()->set_peak_bf16_tflops(1);
  c.mutable_gpu()->set_hbm_gbps(10);
  ScaleCompute(1.0, "none", &c);
  EXPECT_FALSE(c.has_calibration());
  ScaleCompute(2.0, "test", &c);
  EXPECT_DOUBLE_EQ(c.gpu().peak_bf16_tflops(), 0.5);
  EXPECT_DOUBLE_EQ(c.gpu().hbm_gbps(), 5);
  EXPECT_NE(c.calibration().source().find("compute x2"), std::string::npos);
}

}  // namespace
}  // namespace strata::coordinator
