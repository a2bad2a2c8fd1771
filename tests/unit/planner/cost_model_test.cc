// Memory and time terms against hand-computed values (Rajbhandari et al.
// SC'20 for model states, Korthikanti et al. Table 2 for activations,
// Narayanan et al. for the pipeline bubble).
#include "planner/cost_model.h"

#include <cmath>

#include "gtest/gtest.h"
#include "topology/cluster.h"

namespace strata::planner {
namespace {

constexpr double kGiB = 1024.0 * 1024 * 1024;

class CostModelTest : public ::testing::Test {
 protected:
  void SetUp() override {
    model_ = *LoadModel("gpt-18.4b");  // l=40, h=6144, a=48, V=51200
    cluster_ = *topology::LoadCluster("dgx-a100");
    job_.set_global_batch(64);
    job_.set_seq_length(2048);
  }

  Evaluation Eval(const Candidate& c) {
    auto nodes = topology::SelectNodes(cluster_, (c.Gpus() + 7) / 8);
    EXPECT_TRUE(nodes.ok());
    net_ = std::make_unique<Network>(cluster_, *nodes);
    cost_ = std::make_unique<CostModel>(model_, job_, *net_);
    Evaluation e;
    cost_->Evaluate(c, &e);
    EXPECT_TRUE(e.valid);
    return e;
  }

  ModelSpec model_;
  ClusterSpec cluster_;
  JobSpec job_;
  std::unique_ptr<Network> net_;
  std::unique_ptr<CostModel> cost_;
};

TEST_F(CostModelTest, ZeroStagesFollowRajbhandariTable1) {
  Candidate c;
  c.tp = 1;
  c.dp = 8;
  c.micro_batch = 1;
  c.num_microbatches = 8;
  const double psi = CountParameters(model_, 2048).Total(40);
  const double d = 8;
  struct Want {
    int zero;
    bool distopt;
    double weights, grads, optim;  // bytes per parameter
  } wants[] = {{0, false, 2, 2, 12},
               {1, false, 2, 2, 12 / d},
               {2, false, 2, 2 / d, 12 / d},
               {3, false, 2 / d, 2 / d, 12 / d},
               {1, true, 2, 4, 12 / d}};  // Megatron distributed optimizer
  for (const Want& w : wants) {
    c.zero_stage = w.zero;
    c.distributed_optimizer = w.distopt;
    Evaluation e = Eval(c);
    EXPECT_NEAR(e.weights_gib * kGiB, w.weights * psi, 1) << w.zero;
    EXPECT_NEAR(e.gradients_gib * kGiB, w.grads * psi, 1) << w.zero;
    EXPECT_NEAR(e.optimizer_state_gib * kGiB, w.optim * psi, 1) << w.zero;
  }
}

TEST_F(CostModelTest, ActivationsFollowKorthikantiTable2) {
  const double s = 2048, h = 6144, a = 48, l = 40, t = 8, b = 2;
  Candidate c;
  c.tp = 8;
  c.dp = 1;
  c.micro_batch = 2;
  c.num_microbatches = 32;
  // TP + SP + selective recompute: 34 s b h / t per layer.
  c.recompute = Recompute::selective;
  EXPECT_NEAR(Eval(c).activations_gib * kGiB, l * 34 * s * b * h / t, 1);
  // TP + SP, no recompute: s b h (34/t + 5 a s/(h t)).
  c.recompute = Recompute::none;
  EXPECT_NEAR(Eval(c).activations_gib * kGiB,
              l * s * b * h * (34 / t + 5 * a * s / (h * t)), 1);
  // TP without SP: s b h (10 + 24/t + 5 a s/(h t)).
  c.sequence_parallel = false;
  EXPECT_NEAR(Eval(c).activations_gib * kGiB,
              l * s * b * h * (10 + 24 / t + 5 * a * s / (h * t)), 1);
  // Full recompute keeps each layer's input (2 s b h / t under SP) plus the
  // working set of the one layer being recomputed.
  c.sequence_parallel = true;
  c.recompute = Recompute::full;
  EXPECT_NEAR(
      Eval(c).activations_gib * kGiB,
      l * 2 * s * b * h / t + s * b * h * (34 / t + 5 * a * s / (h * t)), 1);
}

TEST_F(CostModelTest,
       PipelineStageZeroHoldsPMicroBatchesAndInterleavingAddsMore) {
  const double s = 2048, h = 6144, l = 40, t = 8, p = 4, v = 2;
  Candidate c;
  c.tp = 8;
  c.pp = 4;
  c.micro_batch = 1;
  c.num_microbatches = 16;
  c.recompute = Recompute::selective;
  Evaluation e = Eval(c);
  EXPECT_EQ(e.critical_stage, 0);
  // 1F1B: p micro-batches of L/p layers = L layers' worth (Narayanan §2.2).
  EXPECT_NEAR(e.activations_gib * kGiB, l * 34 * s * h / t, 1);
  // Interleaved: x (1 + (p-1)/(p v)) (Korthikanti §4.2.3).
  c.vpp = 2;
  EXPECT_NEAR(Eval(c).activations_gib * kGiB,
              l * 34 * s * h / t * (1 + (p - 1) / (p * v)), 1);
}

TEST_F(CostModelTest, BubbleIsPMinusOneOverVmOfThePipelineWork) {
  Candidate c;
  c.tp = 8;
  c.pp = 4;
  c.micro_batch = 1;
  c.num_microbatches = 16;
  for (int v : {1, 2, 5}) {
    c.vpp = v;
    Evaluation e = Eval(c);
    const double work =
        e.compute_s + e.recompute_s + e.tp_comm_s + e.cp_comm_s + e.pp_comm_s;
    EXPECT_NEAR(e.bubble_s / work, 3.0 / (v * 16), 1e-9) << v;
  }
}

TEST_F(CostModelTest, FullRecomputeAddsOneForwardAndTwoTpCollectives) {
  Candidate c;
  c.tp = 8;
  c.micro_batch = 1;
  c.num_microbatches = 64;
  c.recompute = Recompute::none;
  Evaluation none = Eval(c);
  c.recompute = Recompute::full;
  Evaluation full = Eval(c);
  EXPECT_NEAR(full.tp_comm_s / none.tp_comm_s, 6.0 / 4.0, 1e-9);
  // The recompute is one forward; compute holds forward + backward (3x)
  // plus the output layer, so recompute is a bit under a third of it.
  EXPECT_GT(full.recompute_s, 0.3 * full.compute_s);
  EXPECT_LT(full.recompute_s, full.compute_s / 3);
  EXPECT_GT(full.step_s, none.step_s);
}

TEST_F(CostModelTest, TpCommunicationFollowsTheRingVolume) {
  // 4 collectives per layer per micro-batch, each 2 (t-1)/t of 2 b s h
  // bytes at 65% of NVLink's 300 GB/s, plus 2 (t-1) latency steps.
  Candidate c;
  c.tp = 8;
  c.micro_batch = 1;
  c.num_microbatches = 64;
  Evaluation e = Eval(c);
  const double bytes = 2.0 * 2048 * 6144;
  const double one = 2 * 7.0 / 8 * bytes / (300e9 * kNvlinkEfficiency) +
                     2 * 7 * kNvlinkLatency;
  EXPECT_NEAR(e.tp_comm_s, 64 * 40 * 4 * one, 1e-9);
}

TEST_F(CostModelTest, HierarchicalDataParallelTimeUsesEachGpusNicShare) {
  // DP all-reduce over 4 nodes with one member per node: ring over NICs,
  // 2 (k-1)/k of the gradient bytes at 93% of 25 GB/s per GPU.
  GroupLink link;
  link.members_per_node = 1;
  link.nodes = 4;
  link.intra_gbps = 300 * kNvlinkEfficiency;
  link.inter_gbps = 25 * kIbEfficiency;
  const double bytes = 1e9;
  EXPECT_NEAR(Network::AllReduce(bytes, link),
              2 * (0.75 * bytes / (25e9 * kIbEfficiency) + 3 * kNicLatency),
              1e-12);
  // Eight members per node: intra-node reduce-scatter, then each GPU
  // carries 1/8 of the data across the network.
  link.members_per_node = 8;
  EXPECT_NEAR(Network::ReduceScatter(bytes, link),
              7.0 / 8 * bytes / (300e9 * kNvlinkEfficiency) +
                  7 * kNvlinkLatency +
                  0.75 * bytes / 8 / (25e9 * kIbEfficiency) + 3 * kNicLatency,
              1e-12);
}

// CPU ranks (ClusterSpec.cpu_cores_per_node): the step is at least the
// node's work over its cores. strata-small on 4 ranks of one node.
class CpuCostModelTest : public ::testing::Test {
 protected:
  void SetUp() override {
    model_ = *LoadModel("strata-small");
    job_.set_global_batch(16);
    job_.set_seq_length(64);
    job_.mutable_constraints()->set_even_layers(true);
    cluster_.set_name("cpu");
    cluster_.set_gpus_per_node(4);
    cluster_.mutable_gpu()->set_name("cpu-core");
    cluster_.mutable_gpu()->set_peak_bf16_tflops(0.1);
    cluster_.mutable_gpu()->set_gemm_efficiency(1);
    cluster_.mutable_gpu()->set_gemm_half_dim(1);
    cluster_.mutable_gpu()->set_hbm_gbps(8);
    cluster_.mutable_gpu()->set_memory_gib(4);
    cluster_.set_intra_node_gbps(6);
    Nic* nic = cluster_.add_nics();
    nic->set_count(1);
    nic->set_gbps(10);
    nic->set_type(Nic::ethernet);
  }

  Evaluation Eval(const Candidate& c, int cores) {
    cluster_.set_cpu_cores_per_node(cores);
    auto nodes = topology::SelectNodes(cluster_, 1);
    EXPECT_TRUE(nodes.ok());
    Network net(cluster_, *nodes);
    CostModel cost(model_, job_, net);
    Evaluation e;
    cost.Evaluate(c, &e);
    EXPECT_TRUE(e.valid);
    return e;
  }

  ModelSpec model_;
  ClusterSpec cluster_;
  JobSpec job_;
};

TEST_F(CpuCostModelTest, RanksSharingCoresTakeTurns) {
  Candidate c;
  c.pp = 4;
  c.micro_batch = 2;
  c.num_microbatches = 8;
  const Evaluation gpus = Eval(c, 0);  // every rank its own processor
  EXPECT_EQ(gpus.core_sharing_s, 0);
  EXPECT_GT(gpus.bubble_s, 0);
  // Four ranks on two cores: the pipeline's bubble is idle time the other
  // ranks use, so the step is the four stages' work over two cores (their
  // compute and optimizer step, plus the pipeline sends), plus what the
  // cores idle while the pipeline fills and drains: one core, for one
  // micro-batch of stage 0 (first forward, last backward) and one of stage
  // 3 (first backward, last forward), ~2/32 of the work of 8 micro-batches
  // on 4 stages.
  const Evaluation two = Eval(c, 2);
  double work = 0;
  for (double s : two.stage_compute_s) work += s;
  EXPECT_GT(two.core_sharing_s, two.fill_drain_s);
  EXPECT_NEAR(two.step_s, gpus.step_s + two.core_sharing_s, 1e-12);
  EXPECT_NEAR(two.fill_drain_s / (work / 2), 2.0 / 32, 0.25 * 2.0 / 32);
  EXPECT_GT(two.step_s, work / 2 + two.fill_drain_s);
  EXPECT_LT(two.step_s, 1.02 * work / 2 + two.fill_drain_s);
  // One core per rank: the critical path of the 1F1B schedule bounds it.
  const Evaluation four = Eval(c, 4);
  EXPECT_EQ(four.core_sharing_s, 0);
  EXPECT_EQ(four.fill_drain_s, 0);
  EXPECT_DOUBLE_EQ(four.step_s, gpus.step_s);
}

TEST_F(CpuCostModelTest, FillAndDrainIdleOnlyWhenAWaveLeavesCoresFree) {
  // 4 ranks on 2 cores. pp=2 dp=2: a stage's two ranks keep both cores
  // busy whenever any wave is there; pp=4: a wave at an end stage keeps
  // one rank busy.
  Candidate two_by_two;
  two_by_two.pp = 2;
  two_by_two.dp = 2;
  two_by_two.micro_batch = 2;
  two_by_two.num_microbatches = 4;
  EXPECT_EQ(Eval(two_by_two, 2).fill_drain_s, 0);
  Candidate four;
  four.pp = 4;
  four.micro_batch = 2;
  four.num_microbatches = 8;
  EXPECT_GT(Eval(four, 2).fill_drain_s, 0);
  Candidate data;  // no pipeline, no fill
  data.dp = 4;
  data.micro_batch = 2;
  data.num_microbatches = 2;
  EXPECT_EQ(Eval(data, 2).fill_drain_s, 0);
  // GPUs: not a CPU cluster, nothing shared.
  EXPECT_EQ(Eval(four, 0).fill_drain_s, 0);
}

TEST_F(CpuCostModelTest, DataParallelTrafficRunsOnTheSameCores) {
  // dp=4 on four cores: the gradient all-reduce overlaps the backward on
  // GPUs, but CPU ranks copy and reduce it themselves, so it adds to the
  // node's work (a lower bound of the step).
  Candidate c;
  c.dp = 4;
  c.micro_batch = 2;
  c.num_microbatches = 2;
  const Evaluation gpus = Eval(c, 0);
  const Evaluation four = Eval(c, 4);
  EXPECT_GT(gpus.dp_comm_total_s, gpus.dp_comm_s);  // partly hidden
  EXPECT_NEAR(four.step_s,
              gpus.step_s + gpus.dp_comm_total_s - gpus.dp_comm_s, 1e-9);
}

}  // namespace
}  // namespace strata::planner
