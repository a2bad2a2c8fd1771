// Self-calibration (docs/planner.md "Calibration"): a fit to step times and
// GEMMs made by a known device recovers their predictions; the fit is
// stored per cluster and applied.
#include "planner/calibrate.h"

#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "gtest/gtest.h"
#include "planner/model.h"
#include "planner/search.h"

namespace strata::planner {
namespace {

// A CPU node as the coordinator describes it (ClusterFromProbes): one
// "device" per rank at its measured SGEMM rate, gemm_efficiency 1, on two
// cores the ranks share.
ClusterSpec CpuCluster(int ranks) {
  ClusterSpec c;
  c.set_name("probed");
  c.set_num_nodes(1);
  c.set_gpus_per_node(ranks);
  c.mutable_gpu()->set_name("cpu-core");
  c.mutable_gpu()->set_peak_bf16_tflops(0.06);
  c.mutable_gpu()->set_memory_gib(64);
  c.mutable_gpu()->set_gemm_efficiency(1);
  c.mutable_gpu()->set_hbm_gbps(8);
  c.set_intra_node_gbps(64);
  c.set_cpu_cores_per_node(2);
  Nic* nic = c.add_nics();
  nic->set_count(1);
  nic->set_gbps(10);
  nic->set_type(Nic::ethernet);
  return c;
}

Calibration Truth() {
  Calibration t;
  t.set_gemm_efficiency(0.7);
  t.set_gemm_half_dim(24);
  t.set_node_memory_gbps(5);
  t.set_layer_overhead_s(3e-4);
  t.set_intra_node_gbps(1.5);
  return t;
}

// Every (tp, pp, dp) of 2 and 4 ranks, as strata-bench train runs them, with
// step times from the true device and +-3% deterministic noise, and the
// GEMM shapes of the model at the true rate.
MeasuredRuns Synthetic() {
  MeasuredRuns runs;
  runs.set_source("synthetic");
  runs.set_gemm_peak_tflops(0.06);
  for (int ranks : {2, 4}) {
    *runs.add_clusters() = CpuCluster(ranks);
    runs.add_cluster_ranks(ranks);
    for (int tp = 1; tp <= ranks; tp *= 2) {
      for (int pp = 1; tp * pp <= ranks; pp *= 2) {
        StepMeasurement* m = runs.add_steps();
        m->set_model("strata-small");
        m->set_tp(tp);
        m->set_pp(pp);
        m->set_dp(ranks / (tp * pp));
        m->set_micro_batch(2);
        m->set_global_batch(16);
        m->set_seq_length(64);
        runs.add_step_ranks(ranks);
      }
    }
  }
  const Calibration truth = Truth();
  for (int i = 0; i < runs.steps_size(); ++i) {
    const double t = *PredictMeasured(runs, i, truth);
    runs.mutable_steps(i)->add_step_s(t * (1 + 0.03 * std::sin(7.0 * i)));
  }
  for (int d : {32, 64, 128, 256, 512}) {
    GemmMeasurement* g = runs.add_gemms();
    g->set_m(128);
    g->set_n(d);
    g->set_k(256);
    g->set_calls(100);
    const double h = truth.gemm_half_dim();
    const double shape = 128 / (128 + h) * d / (d + h) * 256 / (256 + h);
    g->set_seconds(100 * 2.0 * 128 * d * 256 /
                   (0.06e12 * truth.gemm_efficiency() * shape));
  }
  return runs;
}

TEST(CalibrateTest, FitRecoversTheMeasuredStepTimes) {
  const MeasuredRuns runs = Synthetic();
  std::vector<FitError> errors;
  auto cal = FitCalibration(runs, &errors);
  ASSERT_TRUE(cal.ok()) << cal.status();
  ASSERT_EQ(errors.size(), 9u);
  EXPECT_GT(cal->rms_error_before(), 0.2);  // the uncalibrated model is off
  EXPECT_LT(cal->rms_error_after(), 0.05);
  for (const FitError& e : errors) {
    EXPECT_NEAR(e.after_s / e.measured_s, 1.0, 0.08) << e.what;
  }
  // The GEMM rate is pinned by the GEMM measurements (one rank, so the
  // efficiency and the node load trade against each other).
  EXPECT_NEAR(cal->gemm_efficiency() / (1 + cal->node_load()), 0.7, 0.1);
  EXPECT_EQ(cal->samples(), 9 + 5);
}

// The fit stands for the peak of the runs it fitted: applied on a cluster
// whose probe measured another peak, the prediction does not move with it;
// a second type keeps its ratio to the main one; applying twice is once.
TEST(CalibrateTest, TheFittedPeakReplacesTheProbedOne) {
  const MeasuredRuns runs = Synthetic();
  auto cal = FitCalibration(runs);
  ASSERT_TRUE(cal.ok()) << cal.status();
  EXPECT_DOUBLE_EQ(cal->gemm_peak_tflops(), 0.06);
  const double at_fit = *PredictMeasured(runs, 4, *cal);
  MeasuredRuns faster_probe = runs;
  for (ClusterSpec& c : *faster_probe.mutable_clusters()) {
    c.mutable_gpu()->set_peak_bf16_tflops(0.072);  // a probe 20% high
  }
  EXPECT_NEAR(*PredictMeasured(faster_probe, 4, *cal) / at_fit, 1.0, 1e-9);
  Calibration unpinned = *cal;
  unpinned.clear_gemm_peak_tflops();
  EXPECT_LT(*PredictMeasured(faster_probe, 4, unpinned) / at_fit, 0.97);

  ClusterSpec c = CpuCluster(4);
  c.mutable_gpu()->set_peak_bf16_tflops(0.072);
  NodeOverride* o = c.add_overrides();
  o->mutable_gpu()->set_peak_bf16_tflops(0.036);  // half the main type
  Calibration pin;
  pin.set_gemm_peak_tflops(0.06);
  *c.mutable_calibration() = pin;
  ApplyCalibration(&c);
  EXPECT_DOUBLE_EQ(c.gpu().peak_bf16_tflops(), 0.06);
  EXPECT_DOUBLE_EQ(c.overrides(0).gpu().peak_bf16_tflops(), 0.03);
  ApplyCalibration(&c);
  EXPECT_DOUBLE_EQ(c.gpu().peak_bf16_tflops(), 0.06);
}

TEST(CalibrateTest, BadMeasurementsAreInvalidArgument) {
  MeasuredRuns runs = Synthetic();
  runs.mutable_steps(3)->clear_step_s();
  auto cal = FitCalibration(runs);
  ASSERT_EQ(cal.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(std::string(cal.status().message()).find("steps[3].step_s"),
            std::string::npos);
  EXPECT_EQ(FitCalibration(MeasuredRuns()).status().code(),
            absl::StatusCode::kInvalidArgument);
}

TEST(CalibrateTest, AWorkerProbeCalibratesNicsAndCpuMemory) {
  ClusterSpec cluster = CpuCluster(2);  // one 10 Gb/s NIC
  control::NodeProbe probe;
  probe.set_hostname("node-0");
  probe.set_cpu_cores(2);
  probe.set_copy_gbps(6);
  probe.set_peer_gbps(4);
  auto cal = CalibrationFromProbe(probe, cluster);
  ASSERT_TRUE(cal.ok()) << cal.status();
  EXPECT_DOUBLE_EQ(cal->inter_node_scale(), 0.4);
  EXPECT_DOUBLE_EQ(cal->node_memory_gbps(), 12);  // 2 ranks at 6 GB/s
  *cluster.mutable_calibration() = *cal;
  ApplyCalibration(&cluster);
  EXPECT_DOUBLE_EQ(cluster.nics(0).gbps(), 4);
  EXPECT_DOUBLE_EQ(cluster.gpu().hbm_gbps(), 6);  // each at the copy rate
  ApplyCalibration(&cluster);                     // idempotent
  EXPECT_DOUBLE_EQ(cluster.nics(0).gbps(), 4);
  // A GPU node without a peer measurement: nothing a probe can say.
  probe.set_peer_gbps(0);
  probe.add_gpu_details()->set_name("H100");
  EXPECT_EQ(CalibrationFromProbe(probe, cluster).status().code(),
            absl::StatusCode::kInvalidArgument);
}

TEST(CalibrateTest, RanksOutnumberingCoresTakeTheSharedCoreLatency) {
  Calibration cal;
  cal.set_intra_node_latency_s(2e-5);
  cal.set_shared_core_latency_s(3e-4);
  cal.set_gemm_half_dim(2);
  for (int ranks : {2, 4}) {  // on two cores
    ClusterSpec c = CpuCluster(ranks);
    *c.mutable_calibration() = cal;
    ApplyCalibration(&c);
    EXPECT_DOUBLE_EQ(c.intra_node_latency_s(), ranks > 2 ? 3e-4 : 2e-5);
    EXPECT_DOUBLE_EQ(c.gpu().gemm_half_dim(), 2);
  }
}

// strata-bench train's 4-rank layouts on this machine as the worker probe
// describes it (2 cores; the SGEMM size curve's peak, 110 GFLOP/s), with
// the fit docs/planner.md "Measured on this machine" reports (fitted on
// run A). pp=4 leaves a core idle while its pipeline fills and drains;
// pp=2 dp=2 keeps both busy (a stage's two ranks) and is the pick, as
// measured. Without that idle time pp=4 would win.
TEST(CalibrateTest, FourRanksOnTwoCoresPickTwoStagesOfTwo) {
  PlanRequest req;
  req.model = *LoadModel("strata-small");
  req.cluster = CpuCluster(4);
  req.cluster.mutable_gpu()->set_peak_bf16_tflops(0.110);
  Calibration* fit = req.cluster.mutable_calibration();
  fit->set_gemm_efficiency(0.838);
  fit->set_gemm_half_dim(0.133);
  fit->set_node_memory_gbps(34.4);
  fit->set_layer_overhead_s(274e-6);
  fit->set_intra_node_gbps(1e6);
  fit->set_intra_node_latency_s(25.9e-6);
  fit->set_shared_core_latency_s(1e-7);
  fit->set_node_load(0.001);
  req.gpus = 4;
  req.top_k = 1;
  req.job.set_global_batch(16);
  req.job.set_seq_length(64);
  PlanConstraints* k = req.job.mutable_constraints();
  k->set_cp(1);
  k->set_vpp(1);
  k->set_micro_batch(2);
  k->set_zero_stage(0);
  k->set_recompute(Recompute::none);
  k->set_sequence_parallel(false);
  k->set_even_layers(true);
  auto pick = PlanJob(req);
  ASSERT_TRUE(pick.ok()) << pick.status();
  const Plan& best = pick->plans(0);
  EXPECT_EQ(best.tp(), 1);
  EXPECT_EQ(best.pp(), 2);
  EXPECT_EQ(best.dp(), 2);
  EXPECT_EQ(best.breakdown().fill_drain_s(), 0);
  k->set_tp(1);
  k->set_pp(4);
  k->set_dp(1);
  auto four = PlanJob(req);
  ASSERT_TRUE(four.ok()) << four.status();
  const Plan& pp4 = four->plans(0);
  EXPECT_GT(pp4.step_time_s(), best.step_time_s());
  EXPECT_GT(pp4.breakdown().fill_drain_s(), 0);
  EXPECT_LT(pp4.step_time_s() - pp4.breakdown().fill_drain_s(),
            best.step_time_s());
}

TEST(CalibrateTest, StoredPerClusterAndAppliedByThePlanner) {
  const std::string dir =
      (std::filesystem::temp_directory_path() / "strata_calibrate_test")
          .string();
  std::filesystem::remove_all(dir);
  setenv("STRATA_CALIBRATION_DIR", dir.c_str(), 1);
  EXPECT_EQ(CalibrationPath("dgx-h100", "dgx-h100"), dir + "/dgx-h100.json");
  const std::string file = dir + "/mine.yaml";
  std::filesystem::create_directories(dir);
  { std::ofstream(file) << "name: mine\n"; }
  EXPECT_EQ(CalibrationPath(file, "mine"), file + ".calibration.json");

  const std::string path = CalibrationPath("probed", "probed");
  EXPECT_EQ(LoadCalibration(path).status().code(), absl::StatusCode::kNotFound);
  Calibration cal = Truth();
  cal.set_source("test fit");
  ASSERT_TRUE(SaveCalibration(path, cal).ok());
  auto back = LoadCalibration(path);
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_DOUBLE_EQ(back->gemm_half_dim(), 24);

  PlanRequest req;
  req.model = *LoadModel("strata-small");
  req.cluster = CpuCluster(2);
  req.gpus = 2;
  req.job.set_global_batch(16);
  req.job.set_seq_length(64);
  auto plain = PlanJob(req);
  ASSERT_TRUE(plain.ok()) << plain.status();
  EXPECT_TRUE(plain->calibration().empty());
  *req.cluster.mutable_calibration() = *back;
  auto calibrated = PlanJob(req);
  ASSERT_TRUE(calibrated.ok()) << calibrated.status();
  EXPECT_NE(calibrated->calibration().find("calibration applied (test fit"),
            std::string::npos)
      << calibrated->calibration();
  EXPECT_NE(calibrated->plans(0).step_time_s(), plain->plans(0).step_time_s());

  // Out of range in the stored file: InvalidArgument naming the field.
  { std::ofstream(path) << "{\"gemm_efficiency\": 3}\n"; }
  auto bad = LoadCalibration(path);
  ASSERT_EQ(bad.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(std::string(bad.status().message()).find("gemm_efficiency"),
            std::string::npos);
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace strata::planner
