// Runs the real `strata plan` binary: output shapes, exit codes, messages.
#include <sys/wait.h>

#include <array>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <string>

#include "common/config.h"
#include "gtest/gtest.h"
#include "proto/plan.pb.h"
#include "tests/integration/cli/run_command.h"

namespace strata {
namespace {

using testing::RunResult;
using testing::RunStrata;

constexpr char kBase[] =
    "plan --model llama3-70b --cluster dgx-h100 --gpus 64 --global-batch 256";

TEST(PlanCliTest, JsonOutputParsesIntoPlanReport) {
  RunResult r = RunStrata(std::string(kBase) + " --top 3 --format json");
  ASSERT_EQ(r.code, 0) << r.out;
  PlanReport report;
  ASSERT_TRUE(ParseConfig(r.out, "stdout", &report).ok()) << r.out;
  ASSERT_EQ(report.plans_size(), 3);
  EXPECT_GT(report.search().candidates(), 0);
  EXPECT_GT(report.plans(0).tokens_per_s(), 0);
  EXPECT_NE(r.out.find("\"recompute\":\""), std::string::npos);
}

TEST(PlanCliTest, TableMarksTheWinnerAndExplainShowsBreakdowns) {
  RunResult r = RunStrata(std::string(kBase) + " --top 3 --explain");
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_NE(r.out.find("  *  1 "), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("step (s)"), std::string::npos);
  EXPECT_NE(r.out.find("memory  weights"), std::string::npos);
  EXPECT_NE(r.out.find("vs #1"), std::string::npos);
  EXPECT_NE(r.out.find("placement (order tp-cp-dp-pp, 64 ranks)"),
            std::string::npos);
}

TEST(PlanCliTest, EmitMegatronPrintsTheFlags) {
  RunResult r =
      RunStrata(std::string(kBase) +
                " --fix tp=8,pp=4,vpp=5,recompute=selective --emit megatron");
  ASSERT_EQ(r.code, 0) << r.out;
  for (const char* flag :
       {"--tensor-model-parallel-size 8", "--pipeline-model-parallel-size 4",
        "--num-layers-per-virtual-pipeline-stage 4", "--micro-batch-size",
        "--global-batch-size 256", "--recompute-granularity selective",
        "--sequence-parallel", "--context-parallel-size 1",
        "--group-query-attention", "--swiglu"}) {
    EXPECT_NE(r.out.find(flag), std::string::npos) << flag << "\n" << r.out;
  }
}

TEST(PlanCliTest, EmitTorchrunPrintsCommandAndEnvironment) {
  RunResult r = RunStrata(std::string(kBase) + " --emit torchrun");
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_NE(r.out.find("torchrun --nnodes=8 --nproc-per-node=8"),
            std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("export STRATA_TP="), std::string::npos);
}

// The value after `flag` in emitted Megatron flags ("" when absent).
std::string FlagValue(const std::string& out, const std::string& flag) {
  const size_t at = out.find(flag + " ");
  if (at == std::string::npos) return "";
  const size_t from = at + flag.size() + 1;
  return out.substr(from, out.find_first_of(" \\\n", from) - from);
}

// Issue 16 part 6: for one request, --emit megatron and --emit torchrun
// launch the same plan (they used to differ: pp=8 vpp=2 vs pp=4 vpp=3),
// and when Megatron's constraint (ZeRO 0/1 only) moves it away from the
// table's best, both say so, naming what differs and both step times.
TEST(PlanCliTest, EmittersLaunchOnePlanAndNoteTheConstraint) {
  RunResult meg = RunStrata(std::string(kBase) + " --emit megatron");
  RunResult tr = RunStrata(std::string(kBase) + " --emit torchrun");
  RunResult table = RunStrata(std::string(kBase) + " --top 1 --format json");
  ASSERT_EQ(meg.code, 0) << meg.out;
  ASSERT_EQ(tr.code, 0) << tr.out;
  ASSERT_EQ(table.code, 0) << table.out;
  for (const char* flag :
       {"--tensor-model-parallel-size", "--pipeline-model-parallel-size",
        "--num-layers-per-virtual-pipeline-stage", "--context-parallel-size",
        "--micro-batch-size", "--recompute-granularity",
        "--pipeline-model-parallel-layout"}) {
    EXPECT_EQ(FlagValue(meg.out, flag), FlagValue(tr.out, flag))
        << flag << "\n"
        << meg.out << "\n"
        << tr.out;
  }
  EXPECT_EQ(meg.out.find("--use-distributed-optimizer") == std::string::npos,
            tr.out.find("--use-distributed-optimizer") == std::string::npos);
  PlanReport best;
  ASSERT_TRUE(ParseConfig(table.out, "stdout", &best).ok()) << table.out;
  const Plan& b = best.plans(0);
  // The table's best here shards the optimizer ZeRO-style, which Megatron
  // does not run, so the emitted plan differs and both outputs say how.
  ASSERT_TRUE(b.zero_stage() >= 1 && !b.distributed_optimizer())
      << "the request no longer exercises the constraint: " << table.out;
  for (const RunResult* r : {&meg, &tr}) {
    EXPECT_NE(r->out.find("NOTE: this is not the planner's best plan"),
              std::string::npos)
        << r->out;
    EXPECT_NE(r->out.find("Megatron-LM cannot run that one"),
              std::string::npos)
        << r->out;
    // Said in Megatron's terms, and once (not again on stderr).
    EXPECT_NE(r->out.find("#   why: the best plan shards the optimizer state "
                          "over its"),
              std::string::npos)
        << r->out;
    EXPECT_NE(r->out.find("whose gradient buffer (main_grad) is fp32"),
              std::string::npos)
        << r->out;
    EXPECT_EQ(r->out.find("NOTE:"), r->out.rfind("NOTE:")) << r->out;
    EXPECT_NE(r->out.find("#   differs: "), std::string::npos) << r->out;
    EXPECT_NE(r->out.find("zero 1 (distributed optimizer) vs 1"),
              std::string::npos)
        << r->out;
    EXPECT_NE(r->out.find(" s/step predicted"), std::string::npos) << r->out;
  }
  // Pinning what Megatron cannot run says why, and what would run.
  RunResult z2 =
      RunStrata(std::string(kBase) + " --fix pp=1,zero=2 --emit megatron");
  EXPECT_EQ(z2.code, 2) << z2.out;
  EXPECT_NE(z2.out.find("Megatron-LM shards optimizer state only as its "
                        "distributed optimizer"),
            std::string::npos)
      << z2.out;
  EXPECT_NE(z2.out.find("without that constraint the best plan is tp="),
            std::string::npos)
      << z2.out;
  // A request whose best plan Megatron runs as is gets no note.
  RunResult plain =
      RunStrata(std::string(kBase) + " --fix zero=0 --emit megatron");
  ASSERT_EQ(plain.code, 0) << plain.out;
  EXPECT_EQ(plain.out.find("NOTE"), std::string::npos) << plain.out;
}

// dgx-a100 is Selene (560 nodes, 4,480 GPUs): beyond it the error says how
// to plan the same nodes at a larger size, and --nodes does it.
TEST(PlanCliTest, FixedSizeClusterNamesTheNodesOverride) {
  const std::string big =
      "plan --model llama3-8b --cluster dgx-a100 --gpus 8192 "
      "--global-batch 1024 --top 1";
  RunResult refused = RunStrata(big);
  EXPECT_EQ(refused.code, 2) << refused.out;
  EXPECT_NE(refused.out.find("has 4480 GPUs (560 nodes x 8)"),
            std::string::npos)
      << refused.out;
  EXPECT_NE(refused.out.find("--nodes 1024"), std::string::npos) << refused.out;
  RunResult planned = RunStrata(big + " --nodes 1024");
  EXPECT_EQ(planned.code, 0) << planned.out;
  EXPECT_NE(planned.out.find("8192 x A100"), std::string::npos) << planned.out;
  RunResult small = RunStrata(big + " --nodes 600");
  EXPECT_EQ(small.code, 2) << small.out;
  EXPECT_NE(small.out.find("has 4800 GPUs"), std::string::npos) << small.out;
  RunResult zero = RunStrata(big + " --nodes 0");
  EXPECT_EQ(zero.code, 2) << zero.out;
  EXPECT_NE(zero.out.find("--nodes = 0 is out of range [1, 131072]"),
            std::string::npos)
      << zero.out;
}

// MoE: --explain shows the all-to-all and where its bytes go; the table
// has EP/ETP columns and the parameter counts.
TEST(PlanCliTest, MoeExplainShowsTheAllToAll) {
  RunResult r = RunStrata(
      "plan --model deepseek-v3 --cluster dgx-h100 --gpus 1024 "
      "--global-batch 8192 --fix tp=2,pp=8,ep=64,etp=1,precision=fp8 --top 1 "
      "--explain");
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_NE(r.out.find("671.0B parameters (37.6B active per token), "
                       "precision fp8"),
            std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find(" EP ETP "), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("MoE all-to-all (ep=64, etp=1)"), std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("88% of its bytes leave the node"), std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("all-to-all "), std::string::npos) << r.out;
}

// A DualPipe plan says which schedule its prediction assumes.
TEST(PlanCliTest, DualPipeTableNamesTheSchedule) {
  RunResult r = RunStrata(
      "plan --model mixtral-8x7b --cluster dgx-h100 --gpus 64 "
      "--global-batch 256 --fix pp=4,ep=8,dualpipe=1 --top 1");
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_NE(r.out.find("schedule: DeepSeek's DualPipe"), std::string::npos)
      << r.out;
}

TEST(PlanCliTest, BadInputExitsTwoWithOneClearMessage) {
  struct Case {
    std::string args, message;
  } cases[] = {
      {"plan --model llama9 --cluster dgx-h100 --gpus 8 --global-batch 8",
       "unknown model preset 'llama9'"},
      {"plan --model llama3-8b --cluster nope --gpus 8 --global-batch 8",
       "unknown cluster preset 'nope'"},
      {"plan --model llama3-8b --cluster dgx-h100 --gpus -8 --global-batch 8",
       "--gpus = -8 is out of range [1, 131072]"},
      {"plan --model llama3-8b --cluster dgx-h100 --gpus 8 --global-batch 0",
       "--global-batch = 0 is out of range [1, 16777216]"},
      {"plan --model llama3-405b --cluster dgx-h100 --gpus 8 --global-batch 8",
       "GiB per GPU, has 80"},
      {"plan --model llama3-8b --cluster dgx-h100 --gpus 37 --global-batch 64",
       "uses exactly 37 GPUs"},
      {"plan --model llama3-8b --cluster dgx-h100 --gpus 8 --global-batch 8 "
       "--fix tp=8,bogus=1",
       "unknown key 'bogus'"},
      {"plan --model llama3-8b --cluster dgx-h100 --gpus 8 --global-batch 8 "
       "--fix recompute=sometimes",
       "none, selective, full or selective_op"},
      {"plan --model /nonexistent.yaml --cluster dgx-h100 --gpus 8 "
       "--global-batch 8",
       "cannot open /nonexistent.yaml"},
      {"plan --model llama3-8b --cluster dgx-h100 --gpus 8", "global-batch"},
      {"plan --model llama3-8b --cluster dgx-h100 --gpus 8 --global-batch 8 "
       "--format xml",
       "--format"},
      {"plan --model llama3-8b --cluster dgx-h100 --gpus 8 --global-batch 8 "
       "--fix precision=fp4",
       "--fix precision must be bf16, fp16 or fp8, got 'fp4'"},
      {"plan --model llama3-8b --cluster dgx-a100 --gpus 8 --global-batch 8 "
       "--fix precision=fp8",
       "has no field 'gpu.peak_fp8_tflops'"},
      {"plan --model mixtral-8x7b --cluster dgx-h100 --gpus 64 "
       "--global-batch 256 --fix ep=3",
       "field 'constraints.ep' (--fix ep) = 3 does not divide num_experts 8"},
      {"plan --model mixtral-8x7b --cluster dgx-h100 --gpus 64 "
       "--global-batch 256 --fix ep=0",
       "--fix ep = 0 is out of range [1, 65536]"},
      {"plan --model llama3-8b --cluster dgx-h100 --gpus 8 --global-batch 8 "
       "--fix offload=tape",
       "none, cpu or nvme"},
      {"plan --model llama3-8b --cluster dgx-h100 --gpus 8 --global-batch 8 "
       "--fix layers=odd",
       "even or balanced"},
      {"plan --model llama3-8b --cluster dgx-h100 --gpus 8 --global-batch 8 "
       "--fix pp=1,dualpipe=1",
       "--fix dualpipe=1 needs an even pinned pp of at least 2"},
      {"plan --model llama3-8b --cluster dgx-h100 --gpus 8 --global-batch 8 "
       "--fix pp=2,dualpipe=2",
       "--fix dualpipe must be 0 or 1, got 2"},
      {"plan --model llama3-8b --cluster dgx-h100 --gpus 8 --global-batch 8 "
       "--fix pp=2,dualpipe=1 --emit megatron",
       "no --emit launcher can"},
      {"plan --model llama3-8b --cluster dgx-h100 --gpus 8 --global-batch 8 "
       "--node-speed 3",
       "node=speed pairs"},
      {"plan --model llama3-8b --cluster dgx-h100 --gpus 8 --global-batch 8 "
       "--node-speed 0=0",
       "'node_speed[0].speed' = 0 is out of range (0, 4]"},
      {"plan --calibrate /nonexistent.json", "cannot open /nonexistent.json"},
      {"plan --gpus 8", "are required (or --calibrate FILE)"},
  };
  for (const Case& c : cases) {
    RunResult r = RunStrata(c.args);
    EXPECT_EQ(r.code, 2) << c.args << "\n" << r.out;
    EXPECT_NE(r.out.find(c.message), std::string::npos) << c.args << "\n"
                                                        << r.out;
  }
}

TEST(PlanCliTest, ExplainSaysWhyTheBestPlanOffloads) {
  RunResult r = RunStrata(
      "plan --model llama3-70b --cluster dgx-h100 --gpus 8 --global-batch 16 "
      "--seq 4096 --top 1 --explain --no-calibration");
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_NE(r.out.find("note: offload cpu: the only fitting plans offload"),
            std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("GiB CPU memory per node"), std::string::npos);
  // The table has an offload column when a plan offloads.
  EXPECT_NE(r.out.find(" offload "), std::string::npos) << r.out;
  EXPECT_NE(r.out.find(" cpu     none "), std::string::npos) << r.out;
}

TEST(PlanCliTest, MalformedAndImpossibleModelFiles) {
  const std::string dir = ::testing::TempDir();
  std::ofstream(dir + "/heads.yaml")
      << "name: odd\nnum_layers: 4\nhidden_size: 1000\nnum_attention_heads: 7\n"
         "vocab_size: 100\nseq_length: 128\n";
  std::ofstream(dir + "/broken.yaml") << "name: [oops\n";
  std::ofstream(dir + "/typo.yaml") << "num_layer: 4\n";
  RunResult heads = RunStrata("plan --model " + dir +
                              "/heads.yaml --cluster dgx-h100 "
                              "--gpus 8 --global-batch 8");
  EXPECT_EQ(heads.code, 2);
  EXPECT_NE(heads.out.find("not divisible by num_attention_heads 7"),
            std::string::npos)
      << heads.out;
  RunResult broken = RunStrata("plan --model " + dir +
                               "/broken.yaml --cluster "
                               "dgx-h100 --gpus 8 --global-batch 8");
  EXPECT_EQ(broken.code, 2);
  EXPECT_NE(broken.out.find("broken.yaml:"), std::string::npos) << broken.out;
  RunResult typo = RunStrata("plan --model " + dir +
                             "/typo.yaml --cluster dgx-h100 "
                             "--gpus 8 --global-batch 8");
  EXPECT_EQ(typo.code, 2);
  EXPECT_NE(typo.out.find("'num_layer'"), std::string::npos) << typo.out;
}

TEST(PlanCliTest, ClusterFilesWorkAndMissingFieldsAreNamed) {
  const std::string dir = ::testing::TempDir();
  std::ofstream(dir + "/lab.yaml")
      << "name: lab\n"
         "gpu: {name: L40S, peak_bf16_tflops: 362, memory_gib: 48,\n"
         "      gemm_efficiency: 0.7, hbm_gbps: 864}\n"
         "gpus_per_node: 4\nintra_node_gbps: 32\n"
         "nics: [{count: 2, gbps: 100, type: roce}]\n"
         "network: {nodes_per_leaf: 8, leaves_per_pod: 1, oversubscription: "
         "1}\n"
         "num_nodes: 4\n";
  std::ofstream(dir + "/nogpu.yaml") << "name: nogpu\ngpus_per_node: 8\n";
  RunResult ok = RunStrata("plan --model llama3-8b --cluster " + dir +
                           "/lab.yaml --gpus 16 --global-batch 64 --top 2");
  EXPECT_EQ(ok.code, 0) << ok.out;
  EXPECT_NE(ok.out.find("16 x L40S (lab)"), std::string::npos) << ok.out;
  RunResult too_big = RunStrata("plan --model llama3-8b --cluster " + dir +
                                "/lab.yaml --gpus 32 --global-batch 64");
  EXPECT_EQ(too_big.code, 2);
  EXPECT_NE(too_big.out.find("has 16 GPUs"), std::string::npos) << too_big.out;
  RunResult missing = RunStrata("plan --model llama3-8b --cluster " + dir +
                                "/nogpu.yaml --gpus 8 --global-batch 8");
  EXPECT_EQ(missing.code, 2);
  EXPECT_NE(missing.out.find("field 'gpu' is missing"), std::string::npos)
      << missing.out;
}

}  // namespace
}  // namespace strata
