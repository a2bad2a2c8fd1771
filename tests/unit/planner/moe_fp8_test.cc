// MoE and FP8 (issue 16 parts 1-2): parameter counts of the MoE presets
// against their model cards, the MoE search axes (EP, ETP and Megatron's
// folding rule), FP8's effect on time and memory, and the bad inputs that
// must name their field.
#include <cmath>
#include <string>

#include "gtest/gtest.h"
#include "planner/emit.h"
#include "planner/model.h"
#include "planner/search.h"
#include "topology/cluster.h"

namespace strata::planner {
namespace {

struct Card {
  const char* preset;
  double total_b, active_b;  // model card, billions
  double tolerance;          // relative; the cards round to 0.1B or 1B
};

// Mixtral of Experts (arXiv 2401.04088): 46.7B / 12.9B; Mixtral 8x22B
// announcement: 141B / 39B; DeepSeek-V3 (arXiv 2412.19437): 671B / 37B
// (without the 14B MTP module); Qwen3 cards: 30.5B / 3.3B, 235B / 22B.
TEST(MoeFp8Test, PresetParameterCountsMatchModelCards) {
  const Card cards[] = {{"mixtral-8x7b", 46.7, 12.9, 0.01},
                        {"mixtral-8x22b", 141, 39, 0.01},
                        {"deepseek-v3", 671, 37, 0.02},
                        {"qwen3-30b-a3b", 30.5, 3.3, 0.02},
                        {"qwen3-235b-a22b", 235, 22, 0.02}};
  for (const Card& c : cards) {
    auto m = LoadModel(c.preset);
    ASSERT_TRUE(m.ok()) << m.status();
    const ParamCount p = CountParameters(*m, m->seq_length());
    const int l = m->num_layers();
    EXPECT_NEAR(p.Total(l) / 1e9, c.total_b, c.tolerance * c.total_b)
        << c.preset;
    EXPECT_NEAR(p.Active(l) / 1e9, c.active_b, c.tolerance * c.active_b + 0.05)
        << c.preset;
  }
}

// Training FLOPs count active parameters only: for Mixtral 8x7B the GEMM
// FLOPs per token are 2 x (active parameters - embeddings), not 2 x total.
TEST(MoeFp8Test, FlopsCountActiveParameters) {
  auto m = LoadModel("mixtral-8x7b");
  ASSERT_TRUE(m.ok());
  const ParamCount p = CountParameters(*m, 4096);
  const LayerFlops lf = LayerForwardFlopsPerToken(*m, 4096);
  const double active_layer =
      p.per_layer - p.expert_per_layer + p.active_expert_per_layer;
  // Norm weights are not GEMMs; the router is (2 h E per token).
  EXPECT_NEAR(lf.gemm, 2 * active_layer, 2 * 2 * 4096 + 1);
  EXPECT_LT(lf.gemm, 0.3 * 2 * p.per_layer);
}

PlanRequest Request(const char* model, const char* cluster, int gpus,
                    int batch) {
  PlanRequest req;
  req.model = *LoadModel(model);
  req.cluster = *topology::LoadCluster(cluster);
  req.gpus = gpus;
  req.job.set_global_batch(batch);
  req.top_k = 3;
  req.with_placement = false;
  return req;
}

TEST(MoeFp8Test, SearchFoldsExpertParallelismIntoDataAndContextParallel) {
  auto report = PlanJob(Request("mixtral-8x7b", "dgx-h100", 64, 256));
  ASSERT_TRUE(report.ok()) << report.status();
  for (const Plan& p : report->plans()) {
    EXPECT_EQ(8 % p.ep(), 0);
    // ep x etp divides tp x cp x dp (Megatron-core MoE parallel folding).
    EXPECT_EQ((p.tp() * p.cp() * p.dp()) % (p.ep() * p.etp()), 0)
        << p.ShortDebugString();
    EXPECT_GT(p.params_b(), 46);
    EXPECT_LT(p.active_params_b(), 13.5);
  }
  // Pinned EP and ETP are kept, and the all-to-all shows in the breakdown.
  PlanRequest req = Request("mixtral-8x7b", "dgx-h100", 64, 256);
  req.job.mutable_constraints()->set_ep(8);
  req.job.mutable_constraints()->set_etp(1);
  req.job.mutable_constraints()->set_tp(1);
  auto pinned = PlanJob(req);
  ASSERT_TRUE(pinned.ok()) << pinned.status();
  EXPECT_EQ(pinned->plans(0).ep(), 8);
  EXPECT_GT(pinned->plans(0).breakdown().a2a_comm_s(), 0);
  // EP 8 within one node of 8 GPUs: nothing leaves the node.
  EXPECT_EQ(pinned->plans(0).breakdown().a2a_inter_node_fraction(), 0);
  EXPECT_GT(pinned->plans(0).breakdown().expert_states_gib(), 0);
}

// The placement lists the expert groups: tp(etp)-ep-edp inside a stage.
TEST(MoeFp8Test, PlacementListsExpertGroups) {
  PlanRequest req = Request("mixtral-8x7b", "dgx-h100", 64, 256);
  req.with_placement = true;
  PlanConstraints* f = req.job.mutable_constraints();
  f->set_tp(2);
  f->set_pp(2);
  f->set_ep(4);
  f->set_etp(2);
  auto r = PlanJob(req);
  ASSERT_TRUE(r.ok()) << r.status();
  const Plan& p = r->plans(0);
  ASSERT_EQ(p.tp() * p.cp() * p.dp(), 32);
  int ep_groups = 0, etp_groups = 0;
  for (const Group& g : p.placement().groups()) {
    if (g.kind() == "ep") {
      ASSERT_EQ(g.ranks_size(), 4);
      // EP peers are etp = 2 ranks apart.
      for (int i = 1; i < 4; ++i) EXPECT_EQ(g.ranks(i) - g.ranks(i - 1), 2);
      ++ep_groups;
    } else if (g.kind() == "etp") {
      ASSERT_EQ(g.ranks_size(), 2);
      EXPECT_EQ(g.ranks(1) - g.ranks(0), 1);
      ++etp_groups;
    }
  }
  // pp x etp x edp EP groups, pp x ep x edp ETP groups (edp = 32 / 8 = 4).
  EXPECT_EQ(ep_groups, 2 * 2 * 4);
  EXPECT_EQ(etp_groups, 2 * 4 * 4);
}

TEST(MoeFp8Test, AllToAllAcrossNodesCostsMoreThanInsideOne) {
  // DeepSeek-V3 with EP 64 spans 8 nodes: 7/8 of the bytes leave the node;
  // EP 8 stays inside one.
  auto run = [](int ep) {
    PlanRequest req = Request("deepseek-v3", "dgx-h100", 1024, 8192);
    PlanConstraints* f = req.job.mutable_constraints();
    f->set_tp(2);
    f->set_pp(8);
    f->set_ep(ep);
    f->set_etp(1);
    f->set_micro_batch(1);
    f->set_vpp(4);
    f->set_distributed_optimizer(true);
    f->set_recompute(Recompute::full);
    auto r = PlanJob(req);
    EXPECT_TRUE(r.ok()) << r.status();
    return r.ok() ? r->plans(0).breakdown() : Breakdown();
  };
  const Breakdown wide = run(64), narrow = run(8);
  EXPECT_NEAR(wide.a2a_inter_node_fraction(), 7.0 / 8, 1e-9);
  EXPECT_EQ(narrow.a2a_inter_node_fraction(), 0);
  EXPECT_GT(wide.a2a_comm_s(), narrow.a2a_comm_s());
  // EP 8 keeps 8x the experts per GPU.
  EXPECT_GT(narrow.expert_states_gib(), 4 * wide.expert_states_gib());
}

TEST(MoeFp8Test, Fp8IsFasterAndHoldsFp8Copies) {
  PlanRequest req = Request("llama3-70b", "dgx-h100", 64, 128);
  PlanConstraints* f = req.job.mutable_constraints();
  f->set_tp(4);
  f->set_pp(8);
  f->set_vpp(5);
  f->set_micro_batch(1);
  f->set_distributed_optimizer(true);
  auto bf16 = PlanJob(req);
  f->set_precision(Precision::fp8);
  auto fp8 = PlanJob(req);
  ASSERT_TRUE(bf16.ok()) << bf16.status();
  ASSERT_TRUE(fp8.ok()) << fp8.status();
  const Plan& a = bf16->plans(0);
  const Plan& b = fp8->plans(0);
  EXPECT_EQ(a.precision(), "bf16");
  EXPECT_EQ(b.precision(), "fp8");
  // Only the layers' GEMMs get faster (attention, elementwise kernels,
  // communication stay bf16; casts are added): faster, but less than 2x.
  EXPECT_LT(b.step_time_s(), 0.9 * a.step_time_s());
  EXPECT_GT(b.step_time_s(), 0.5 * a.step_time_s());
  EXPECT_EQ(a.breakdown().fp8_buffers_gib(), 0);
  EXPECT_GT(b.breakdown().fp8_buffers_gib(), 0);
  // The emitted Megatron flags turn Transformer Engine FP8 on.
  const std::string flags = EmitMegatron(b, req.model);
  for (const char* flag : {"--fp8-format hybrid", "--fp8-amax-history-len 1024",
                           "--fp8-amax-compute-algo max", "--bf16"}) {
    EXPECT_NE(flags.find(flag), std::string::npos) << flag << "\n" << flags;
  }
  EXPECT_EQ(EmitMegatron(a, req.model).find("--fp8"), std::string::npos);
}

TEST(MoeFp8Test, PrecisionComesFromFixThenJobThenModel) {
  ModelSpec m = *LoadModel("llama3-8b");
  JobSpec job;
  EXPECT_EQ(EffectivePrecision(m, job), Precision::bf16);
  m.set_precision(Precision::fp8);
  EXPECT_EQ(EffectivePrecision(m, job), Precision::fp8);
  job.mutable_constraints()->set_precision(Precision::bf16);
  EXPECT_EQ(EffectivePrecision(m, job), Precision::bf16);
}

TEST(MoeFp8Test, MegatronFlagsDescribeTheExperts) {
  PlanRequest req = Request("deepseek-v3", "dgx-h100", 1024, 8192);
  PlanConstraints* f = req.job.mutable_constraints();
  f->set_tp(2);
  f->set_pp(8);
  f->set_ep(64);
  f->set_etp(1);
  f->set_precision(Precision::fp8);
  req.megatron_compatible = true;
  auto r = PlanJob(req);
  ASSERT_TRUE(r.ok()) << r.status();
  const std::string flags = EmitMegatron(r->plans(0), req.model);
  for (const char* flag :
       {"--expert-model-parallel-size 64", "--expert-tensor-parallel-size 1",
        "--num-experts 256", "--moe-router-topk 8",
        "--moe-ffn-hidden-size 2048",
        "--moe-shared-expert-intermediate-size 2048",
        "--moe-layer-freq '[0,0,0,1,", "--multi-latent-attention",
        "--kv-lora-rank 512", "--q-lora-rank 1536", "--qk-head-dim 128",
        "--qk-pos-emb-head-dim 64", "--v-head-dim 128",
        "--moe-token-dispatcher-type alltoall", "--moe-grouped-gemm",
        "--fp8-format hybrid"}) {
    EXPECT_NE(flags.find(flag), std::string::npos) << flag << "\n" << flags;
  }
}

void ExpectInvalid(const Status& st, const std::string& part) {
  EXPECT_EQ(st.code(), absl::StatusCode::kInvalidArgument) << st;
  EXPECT_NE(std::string(st.message()).find(part), std::string::npos) << st;
}

TEST(MoeFp8Test, BadInputNamesTheField) {
  // Top-k above the experts.
  ModelSpec m = *LoadModel("mixtral-8x7b");
  m.set_moe_router_topk(9);
  ExpectInvalid(NormalizeModel(&m),
                "field 'moe_router_topk' = 9 exceeds num_experts 8");
  // No MoE layer left.
  m = *LoadModel("mixtral-8x7b");
  m.set_moe_num_dense_layers(32);
  ExpectInvalid(NormalizeModel(&m), "field 'moe_num_dense_layers' = 32");
  // EP that does not divide the experts.
  PlanRequest req = Request("mixtral-8x7b", "dgx-h100", 64, 256);
  req.job.mutable_constraints()->set_ep(3);
  ExpectInvalid(PlanJob(req).status(),
                "field 'constraints.ep' (--fix ep) = 3 does not divide "
                "num_experts 8");
  // EP on a dense model.
  req = Request("llama3-8b", "dgx-h100", 8, 8);
  req.job.mutable_constraints()->set_ep(2);
  ExpectInvalid(PlanJob(req).status(), "needs an MoE model");
  // FP8 on a GPU without an FP8 peak.
  req = Request("llama3-8b", "dgx-a100", 8, 8);
  req.job.mutable_constraints()->set_precision(Precision::fp8);
  ExpectInvalid(PlanJob(req).status(),
                "GPU 'A100-SXM4-80GB' has no field 'gpu.peak_fp8_tflops'");
  req = Request("llama3-8b", "frontier-mi250x", 8, 8);
  req.job.set_precision(Precision::fp8);
  ExpectInvalid(PlanJob(req).status(), "gpu.peak_fp8_tflops");
}

TEST(MoeFp8Test, DenseModelsKeepTheirPlans) {
  // A dense model never gets EP/ETP, and bf16 stays the default.
  auto r = PlanJob(Request("llama3-70b", "dgx-h100", 64, 256));
  ASSERT_TRUE(r.ok()) << r.status();
  for (const Plan& p : r->plans()) {
    EXPECT_EQ(p.ep(), 1);
    EXPECT_EQ(p.etp(), 1);
    EXPECT_EQ(p.precision(), "bf16");
    EXPECT_EQ(p.breakdown().a2a_comm_s(), 0);
    EXPECT_DOUBLE_EQ(p.params_b(), p.active_params_b());
  }
}

}  // namespace
}  // namespace strata::planner
