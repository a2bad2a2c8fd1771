// Validation of the MoE and FP8 models against published training runs
// with full layouts (issue 16 goal: median error within 15%), like
// table1_test for dense BF16. Each published configuration is pinned with
// --fix (TP, PP, CP, VPP, EP, ETP 1, micro-batch, distributed optimizer or
// FSDP, precision); recompute is left to the planner (the recipes choose
// what fits). The constants were set from first principles and hardware
// facts (docs/planner.md), not fitted to these rows, except the MoE host
// time per expert operation (planner/moe_host.h), calibrated on the
// gpt-oss-120b [B26] row alone; the table printed here
// is the one in docs/planner-validation.md "Validation: MoE and FP8".
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "planner/dualpipe.h"
#include "planner/model.h"
#include "planner/search.h"
#include "topology/cluster.h"

namespace strata::planner {
namespace {

struct PublishedRun {
  const char* label;
  const char* model;
  bool h800;  // DeepSeek's H800 cluster instead of dgx-h100
  int gpus, gbs, mbs, seq, tp, pp, cp, vpp, ep;
  Precision::Kind precision;
  bool fsdp;                // ZeRO-3 instead of the distributed optimizer
  double tokens_per_gpu_s;  // published (or derived from published TFLOP/s)
  const char* source;
  // Multi-token-prediction depth trained (DeepSeek-V3 §4.2: D = 1; the NeMo
  // DeepSeek-V3 recipe sets mtp_num_layers 1).
  int mtp = 0;
  // DeepSeek's DualPipe schedule ([D] only; --fix dualpipe=1).
  bool dualpipe = false;
  // The error docs/planner.md's table gives for this row (predicted /
  // published - 1): the test fails when the model moves any row, better or
  // worse, until the table is updated.
  double documented = 0;
};

// Sources:
// [B] Megatron-Bridge docs/performance-summary.md (NeMo 25.11 container,
//     DGX-H100, FP8 current scaling; "we force-balance the token
//     distribution among experts and all benchmarks are token-dropless").
// [B9] the same page's archive, NeMo 25.09, DGX-H100 (FP8).
// [B26] the archive's NeMo 26.02 section, DGX-H100 (GPT OSS 120B, BF16).
// gpt-oss-120b ([B] and [B26]): 128 experts top-4, sliding windows of 128
// on every other layer, attention sinks (planner/models/gpt-oss-120b.yaml).
// No gpt-oss-20b run is published there. The [B] row runs the recipe's
// micro-batch, 1, not the page's 4: the page's PP 4, MBS 4 and GA 2 cannot
// all hold at GBS 512 on 64 GPUs (GA 2 with MBS 4 means PP 1, the B200
// row's layout), and the recipe of the same commit (Megatron-Bridge
// 5776a6d, gpt_oss_workload_base_configs.py,
// GPT_OSS_120B_PRETRAIN_CONFIG_H100_BF16) runs PP 4 with the base
// micro-batch 1. With MBS 4 the row is +18.4%. It is not independent of
// the calibration row [B26]: the same recipe, GBS 512 instead of 1280.
// [M] Megatron-LM megatron/core/transformer/moe/README.md: Mixtral 8x7B,
//     64 H100, TP1 EP8 PP4 VP8, MBS 1, GBS 256, seq 4096, BF16, 468 TFLOP/s
//     per GPU (MCore v0.9); tokens/s derived with strata's FLOP count.
// [D] DeepSeek-V3 Technical Report (arXiv 2412.19437) §3.2 and Table 1:
//     2048 H800, PP16, EP64 over 8 nodes, ZeRO-1 DP, FP8, batch 15360 x
//     4096 tokens; 180K H800 GPU hours per trillion tokens = 1543 tokens/s
//     per GPU (DualPipe, §3.2.1, pinned as --fix dualpipe=1; micro-batch
//     not published, 1 assumed).
const PublishedRun kRuns[] = {
    {"llama3-70b fp8", "llama3-70b", false, 64, 128, 1, 8192, 4, 8, 1, 5, 1,
     Precision::fp8, false, 1602, "[B]", 0, false, -0.082},
    {"llama3.1-405b fp8", "llama3-405b", false, 1024, 512, 1, 8192, 8, 8, 2, 8,
     1, Precision::fp8, false, 292, "[B]", 0, false, +0.008},
    {"llama3-8b fp8 fsdp", "llama3-8b", false, 8, 128, 1, 8192, 1, 1, 1, 1, 1,
     Precision::fp8, true, 14451, "[B]", 0, false, +0.010},
    {"qwen3-30b-a3b fp8", "qwen3-30b-a3b", false, 16, 512, 2, 4096, 1, 2, 1, 24,
     8, Precision::fp8, false, 5275, "[B]", 0, false, -0.050},
    {"qwen3-235b-a22b fp8", "qwen3-235b-a22b", false, 256, 2048, 1, 4096, 2, 8,
     1, 4, 32, Precision::fp8, false, 1575, "[B]", 0, false, -0.034},
    {"deepseek-v3 fp8", "deepseek-v3", false, 1024, 8192, 1, 4096, 2, 8, 1, 4,
     64, Precision::fp8, false, 1297, "[B9]", 1, false, -0.196},
    {"mixtral-8x7b bf16", "mixtral-8x7b", false, 64, 256, 1, 4096, 1, 4, 1, 8,
     8, Precision::bf16, false, 0, "[M]", 0, false, +0.170},
    {"deepseek-v3 h800", "deepseek-v3", true, 2048, 15360, 1, 4096, 1, 16, 1, 0,
     64, Precision::fp8, false, 1543, "[D]", 1, true, -0.254},
    {"gpt-oss-120b bf16", "gpt-oss-120b", false, 64, 512, 1, 4096, 1, 4, 1, 1,
     8, Precision::bf16, false, 5630, "[B]", 0, false, -0.005},
    {"gpt-oss-120b bf16", "gpt-oss-120b", false, 64, 1280, 1, 4096, 1, 4, 1, 1,
     8, Precision::bf16, false, 5993, "[B26]", 0, false, -0.002},
};

// H800 SXM: H100 compute (989 BF16 / 1979 FP8 dense TFLOP/s) with NVLink cut
// to 400 GB/s bidirectional (200 per direction; DeepSeek-V3 §3.2.2 measures
// 160 GB/s), 8 x 400 Gb/s InfiniBand per node.
ClusterSpec H800() {
  ClusterSpec c = *topology::LoadCluster("dgx-h100");
  c.set_name("h800");
  c.mutable_gpu()->set_name("H800-SXM5-80GB");
  c.set_intra_node_gbps(200);
  return c;
}

double Published(const PublishedRun& r, const ModelSpec& m) {
  if (r.tokens_per_gpu_s > 0) return r.tokens_per_gpu_s;
  // [M] publishes 468 model TFLOP/s per GPU.
  const StepFlops f = TrainingFlops(m, 1, r.seq, Recompute::none);
  return 468e12 / (f.model / r.seq);
}

double Predicted(const PublishedRun& r, const ModelSpec& m) {
  PlanRequest req;
  req.model = m;
  req.cluster = r.h800 ? H800() : *topology::LoadCluster("dgx-h100");
  req.gpus = r.gpus;
  req.top_k = 1;
  req.with_placement = false;
  req.job.set_global_batch(r.gbs);
  req.job.set_seq_length(r.seq);
  PlanConstraints* f = req.job.mutable_constraints();
  f->set_tp(r.tp);
  f->set_pp(r.pp);
  f->set_cp(r.cp);
  if (r.vpp > 0) f->set_vpp(r.vpp);
  // The recipes run Megatron's default even split when the layers divide
  // into p x vpp virtual stages (Qwen3-30B: 48 on 2 x 24; the others need
  // an uneven split, which the planner balances).
  const int chunks = r.pp * std::max(1, r.vpp);
  if (m.num_layers() % chunks == 0) f->set_even_layers(true);
  f->set_micro_batch(r.mbs);
  if (r.dualpipe) f->set_dualpipe(true);
  f->set_precision(r.precision);
  if (m.num_experts() > 0) {
    f->set_ep(r.ep);
    f->set_etp(1);
  }
  if (r.fsdp) {
    f->set_zero_stage(3);
  } else {
    f->set_zero_stage(1);
    f->set_distributed_optimizer(true);
  }
  auto report = PlanJob(req);
  EXPECT_TRUE(report.ok()) << r.label << ": " << report.status();
  if (!report.ok()) return 0;
  return report->plans(0).tokens_per_s() / r.gpus;
}

TEST(PublishedMoeFp8Test, ErrorsAreTheDocumentedOnes) {
  std::vector<double> errors;
  std::printf(
      "| run | GPUs | layout | published tok/s/GPU | predicted | error |\n");
  for (const PublishedRun& r : kRuns) {
    ModelSpec m = *LoadModel(r.model);
    m.set_mtp_num_layers(r.mtp);
    const double pub = Published(r, m);
    const double pred = Predicted(r, m);
    const double err = pred / pub - 1;
    errors.push_back(std::fabs(err));
    EXPECT_NEAR(err, r.documented, 0.002) << r.label;
    std::printf(
        "| %s %s | %d | tp%d pp%d cp%d vp%d ep%d mbs%d gbs%d | %.0f | %.0f | "
        "%+.1f%% |\n",
        r.label, r.source, r.gpus, r.tp, r.pp, r.cp, r.vpp, r.ep, r.mbs, r.gbs,
        pub, pred, 100 * err);
  }
  auto median_of = [](std::vector<double> e) {
    std::sort(e.begin(), e.end());
    const size_t n = e.size();
    return n % 2 ? e[n / 2] : (e[n / 2 - 1] + e[n / 2]) / 2;
  };
  const double median = median_of(errors);
  std::printf("median |error| %.1f%%, worst %.1f%%\n", 100 * median,
              100 * *std::max_element(errors.begin(), errors.end()));
  // Issue 16's goal held on its rows, the first eight.
  const double issue16 =
      median_of(std::vector<double>(errors.begin(), errors.begin() + 8));
  std::printf("median |error| of the first 8 rows %.1f%%\n", 100 * issue16);
  EXPECT_LE(issue16, 0.15);
  // Issue 36's worst-row goal (30%) holds on every row since the
  // host-bound expert block (planner/moe_host.h); its median goal (6%)
  // does not yet (6.6%).
  EXPECT_LE(*std::max_element(errors.begin(), errors.end()), 0.30);
}

// DeepSeek-V3 report Table 2 with B = 2F, W = F, F&B = F + B: the bubble is
// 2 (PP/2 - 1) / 3 slots of F + B (1F1B: PP - 1).
TEST(PublishedMoeFp8Test, DualPipeBubbleIsTable2s) {
  EXPECT_DOUBLE_EQ(DualPipeBubbleSlots(16), 14.0 / 3);
  EXPECT_DOUBLE_EQ(DualPipeBubbleSlots(2), 0.0);
  // Hidden up to the compute, with the 10% overlap tax; the rest exposed.
  EXPECT_DOUBLE_EQ(DualPipeExposedA2a(1.0, 4.0), 0.1);
  EXPECT_DOUBLE_EQ(DualPipeExposedA2a(5.0, 4.0), 1.0 + 0.4);
}

// DualPipe needs an even pinned pp and no virtual stages, and no launcher
// can run it.
TEST(PublishedMoeFp8Test, DualPipeRefusesWhatItCannotRun) {
  PlanRequest req;
  req.model = *LoadModel("deepseek-v3");
  req.cluster = H800();
  req.gpus = 2048;
  req.with_placement = false;
  req.job.set_global_batch(15360);
  req.job.set_seq_length(4096);
  PlanConstraints* f = req.job.mutable_constraints();
  f->set_dualpipe(true);
  f->set_pp(15);
  auto odd = PlanJob(req);
  ASSERT_FALSE(odd.ok());
  EXPECT_NE(odd.status().message().find("dualpipe=1 needs an even pinned pp"),
            std::string::npos)
      << odd.status();
  f->set_pp(16);
  f->set_vpp(2);
  auto vpp = PlanJob(req);
  ASSERT_FALSE(vpp.ok());
  EXPECT_NE(vpp.status().message().find("vpp"), std::string::npos);
  f->clear_vpp();
  req.megatron_compatible = true;
  auto emit = PlanJob(req);
  ASSERT_FALSE(emit.ok());
  EXPECT_NE(emit.status().message().find("--emit"), std::string::npos);
}

}  // namespace
}  // namespace strata::planner
