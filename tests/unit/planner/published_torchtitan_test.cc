// Published runs the planner had not seen (issue 36): torchtitan's
// performance table on Grand Teton H100s (pytorch/torchtitan
// docs/performance.md at commit 3639002, torch 2024-12-23): FSDP2 in
// eager mode and under torch.compile, Float8 linears, 2D (FSDP + TP) and
// 3D (FSDP + TP + PP, 1F1B and interleaved) Llama 3.1 runs. Each
// configuration is pinned with --fix; the predictions are compared with
// the published tokens/s per GPU. Nothing was fitted to these rows.
// Every row runs attention through PyTorch's SDPA (--fix sdpa=1:
// FlashAttention-2 on Hopper) and the Table 1 and 3 eager rows without
// torch.compile (--fix eager=1: unfused norms, RoPE and SwiGLU).
//
// The hardware (performance.md): 8 H100 per host on NVLink, 96 GB HBM2e
// at 2.4 TB/s, 400 Gb/s RDMA per GPU, a 500 W power limit ("the actual
// peak TFLOPs number is between SXM and NVL"); the peaks are
// PowerCappedPeak's, HBM and memory are the page's.
// FSDP without PP is ZeRO-3; with PP torchtitan keeps the parameters
// gathered across micro-batches (reshard_after_forward off), which strata
// costs as a sharded optimizer (ZeRO-1): strata refuses ZeRO-2/3 with PP.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "planner/model.h"
#include "planner/search.h"
#include "topology/cluster.h"

namespace strata::planner {
namespace {

struct Row {
  const char* label;
  const char* model;
  int gpus, gbs, mbs, seq, tp, pp, cp, vpp;
  int zero;  // 3: FSDP; 1: FSDP with PP (see above)
  Precision::Kind precision;
  Recompute::Mode recompute;
  bool eager;        // without torch.compile (--fix eager=1)
  double published;  // tokens/s per GPU
  // The prediction's error as docs/planner-validation.md records it
  // ("Validation: runs not seen before"); the test fails when the model moves it.
  double documented;
};

const Row kRows[] = {
    // Table 1: 8 GPUs, local batch 2, selective AC: llama3_8b.toml's
    // selective_ac_option 'op' (torchtitan's op-level policy).
    {"8b fsdp eager, 8 GPUs", "llama3-8b", 8, 16, 2, 8192, 1, 1, 1, 1, 3,
     Precision::bf16, Recompute::selective_op, true, 5762, +0.035},
    {"8b fsdp compile, 8 GPUs", "llama3-8b", 8, 16, 2, 8192, 1, 1, 1, 1, 3,
     Precision::bf16, Recompute::selective_op, false, 6667, +0.038},
    {"8b fsdp compile float8, 8 GPUs", "llama3-8b", 8, 16, 2, 8192, 1, 1, 1, 1,
     3, Precision::fp8, Recompute::selective_op, false, 8532, -0.005},
    // Table 3: 128 GPUs, local batch 2.
    {"8b fsdp eager, 128 GPUs", "llama3-8b", 128, 256, 2, 8192, 1, 1, 1, 1, 3,
     Precision::bf16, Recompute::selective_op, true, 5605, +0.064},
    {"8b fsdp compile float8, 128 GPUs", "llama3-8b", 128, 256, 2, 8192, 1, 1,
     1, 1, 3, Precision::fp8, Recompute::selective_op, false, 8380, +0.012},
    // Table 4: 70B, 256 GPUs, FSDP 32 x TP 8, local batch 16, full AC.
    {"70b fsdp32 tp8 float8", "llama3-70b", 256, 512, 16, 8192, 8, 1, 1, 1, 3,
     Precision::fp8, Recompute::full, false, 829, -0.021},
    // Table 5: 405B, 512 GPUs, FSDP 8 x TP 8 x PP 8, local batch 32, full
    // AC, Float8. torchtitan splits the local batch into
    // pipeline_parallel_microbatches, whose default is the PP degree
    // (torchtitan/parallelisms/pipelining_utils.py at 9dec370: "The default
    // value will be the number of pipeline stages"): 8 micro-batches of 4
    // sequences, for both schedules.
    {"405b 3d 1F1B float8", "llama3-405b", 512, 256, 4, 8192, 8, 8, 1, 1, 1,
     Precision::fp8, Recompute::full, false, 100, +0.059},
    {"405b 3d interleaved float8", "llama3-405b", 512, 256, 4, 8192, 8, 8, 1, 2,
     1, Precision::fp8, Recompute::full, false, 128, +0.076},
    // Table 2: 8B, 8 GPUs, long context, local batch 1, full AC, Float8.
    {"8b fsdp8 cp1 32k float8", "llama3-8b", 8, 8, 1, 32768, 1, 1, 1, 1, 3,
     Precision::fp8, Recompute::full, false, 3890, -0.190},
    {"8b fsdp2 cp4 128k float8", "llama3-8b", 8, 2, 1, 131072, 1, 1, 4, 1, 3,
     Precision::fp8, Recompute::full, false, 1071, -0.123},
};

// Dense tensor-core peak of an H100 (132 SMs) held to `watts`: the page
// says the 500 W part's peak lies between the SXM's and the NVL's. NVIDIA
// datasheets: H100 SXM 989 BF16 / 1979 FP8 dense TFLOP/s at up to 700 W;
// H100 NVL 835.5 / 1670.5 (1671 / 3341 with sparsity) at up to 400 W.
// Interpolated linearly in the power limit between the two (an assumption:
// the clock a power cap allows is not linear in watts); 500 W gives 0.897
// of the SXM peak.
double PowerCappedPeak(double watts, double sxm_700w, double nvl_400w) {
  const double f = std::clamp((watts - 400) / (700 - 400), 0.0, 1.0);
  return nvl_400w + f * (sxm_700w - nvl_400w);
}

ClusterSpec GrandTeton() {
  ClusterSpec c = *topology::LoadCluster("dgx-h100");
  c.set_name("grand-teton");
  c.mutable_gpu()->set_name("H100-96GB-HBM2e-500W");
  c.mutable_gpu()->set_peak_bf16_tflops(PowerCappedPeak(500, 989, 835.5));
  c.mutable_gpu()->set_peak_fp8_tflops(PowerCappedPeak(500, 1979, 1670.5));
  c.mutable_gpu()->set_memory_gib(96);
  c.mutable_gpu()->set_hbm_gbps(2400);
  return c;
}

double Predicted(const Row& r) {
  PlanRequest req;
  req.model = *LoadModel(r.model);
  req.cluster = GrandTeton();
  req.gpus = r.gpus;
  req.top_k = 1;
  req.with_placement = false;
  req.job.set_global_batch(r.gbs);
  req.job.set_seq_length(r.seq);
  PlanConstraints* f = req.job.mutable_constraints();
  f->set_tp(r.tp);
  f->set_pp(r.pp);
  f->set_cp(r.cp);
  f->set_vpp(r.vpp);
  f->set_micro_batch(r.mbs);
  f->set_precision(r.precision);
  f->set_recompute(r.recompute);
  if (r.eager) f->set_eager(true);
  f->set_sdpa(true);  // torchtitan's attention: PyTorch SDPA
  f->set_zero_stage(r.zero);
  f->set_distributed_optimizer(false);
  auto report = PlanJob(req);
  EXPECT_TRUE(report.ok()) << r.label << ": " << report.status();
  if (!report.ok()) return 0;
  return report->plans(0).tokens_per_s() / r.gpus;
}

TEST(PublishedTorchtitanTest, ErrorsAreTheDocumentedOnes) {
  std::vector<double> errors;
  std::printf("| run | GPUs | published tok/s/GPU | predicted | error |\n");
  for (const Row& r : kRows) {
    const double pred = Predicted(r);
    const double err = pred / r.published - 1;
    errors.push_back(std::fabs(err));
    std::printf("| %s | %d | %.0f | %.0f | %+.1f%% |\n", r.label, r.gpus,
                r.published, pred, 100 * err);
    EXPECT_NEAR(err, r.documented, 0.002) << r.label;
  }
  std::sort(errors.begin(), errors.end());
  const size_t n = errors.size();
  const double median =
      n % 2 ? errors[n / 2] : (errors[n / 2 - 1] + errors[n / 2]) / 2;
  std::printf("median |error| %.1f%%, worst %.1f%%\n", 100 * median,
              100 * errors.back());
  // Issue 36's goal on this set: median within 6%, worst within 30%.
  EXPECT_LE(median, 0.06);
  EXPECT_LE(errors.back(), 0.30);
}

// eager and sdpa cost torchtitan's runs; no --emit launcher runs them, and
// eager mode is slower than the same plan compiled (its unfused kernels).
TEST(PublishedTorchtitanTest, EagerAndSdpaAreCostedNotEmitted) {
  Row r = kRows[0];
  r.eager = false;
  const double compiled = Predicted(r);
  r.eager = true;
  EXPECT_LT(Predicted(r), compiled * 0.9);
  for (int i = 0; i < 2; ++i) {
    PlanRequest req;
    req.model = *LoadModel("llama3-8b");
    req.cluster = GrandTeton();
    req.gpus = 8;
    req.with_placement = false;
    req.megatron_compatible = true;
    req.job.set_global_batch(16);
    req.job.set_seq_length(8192);
    if (i == 0) req.job.mutable_constraints()->set_eager(true);
    if (i == 1) req.job.mutable_constraints()->set_sdpa(true);
    auto report = PlanJob(req);
    ASSERT_FALSE(report.ok());
    EXPECT_EQ(report.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_NE(report.status().message().find("--emit"), std::string::npos)
        << report.status();
  }
}

}  // namespace
}  // namespace strata::planner
