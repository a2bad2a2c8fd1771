// Optimizer offload to CPU memory / NVMe (docs/planner.md "Offload"): chosen
// only when it is the fastest plan that fits, pruned with its reason when
// the host is too small.
#include <string>

#include "gtest/gtest.h"
#include "planner/emit.h"
#include "planner/model.h"
#include "planner/search.h"
#include "topology/cluster.h"

namespace strata::planner {
namespace {

PlanRequest Request(const char* model, int gpus, int batch) {
  PlanRequest req;
  req.model = *LoadModel(model);
  req.cluster = *topology::LoadCluster("dgx-h100");
  req.gpus = gpus;
  req.job.set_global_batch(batch);
  req.job.set_seq_length(4096);
  return req;
}

bool HasNote(const PlanReport& r, const std::string& text) {
  for (const std::string& n : r.notes()) {
    if (n.find(text) != std::string::npos) return true;
  }
  return false;
}

// Llama 3 70B on one DGX H100 (8 GPUs): 16 bytes of model state per
// parameter need 141 GiB per GPU even fully sharded, so only offload fits.
TEST(OffloadTest, ModelThatFitsOnlyWithOffloadGetsAnOffloadPlan) {
  PlanRequest req = Request("llama3-70b", 8, 16);
  req.job.mutable_constraints()->set_offload(Offload::none);
  auto plain = PlanJob(req);
  ASSERT_EQ(plain.status().code(), absl::StatusCode::kResourceExhausted)
      << plain.status();

  req.job.mutable_constraints()->clear_offload();
  auto report = PlanJob(req);
  ASSERT_TRUE(report.ok()) << report.status();
  const Plan& best = report->plans(0);
  EXPECT_NE(best.offload(), Offload::none);
  EXPECT_EQ(best.breakdown().optimizer_state_gib(), 0);
  EXPECT_LE(best.memory_gib_per_gpu(), 80);
  // The host step is on the step time, and the host holds 16 bytes per
  // parameter (cpu) or 4 (nvme) for all 70.6B parameters.
  EXPECT_GT(best.breakdown().offload_s(), 0);
  EXPECT_GE(best.breakdown().offload_total_s(), best.breakdown().offload_s());
  EXPECT_GT(best.breakdown().cpu_memory_gib_per_node(), 200);
  EXPECT_LE(best.breakdown().cpu_memory_gib_per_node(), 2048);
  EXPECT_TRUE(HasNote(*report, "the only fitting plans offload"))
      << report->notes_size();
  // CPU Adam on 70.6B parameters at 4e9/s takes ~17.6 s per step.
  if (best.offload() == Offload::cpu) {
    EXPECT_NEAR(best.breakdown().offload_s(), 70.6e9 / 4e9, 2.5);
  }
}

TEST(OffloadTest, WithEnoughGpusThePlanWithoutOffloadWins) {
  PlanRequest req = Request("llama3-70b", 64, 256);
  auto report = PlanJob(req);
  ASSERT_TRUE(report.ok()) << report.status();
  EXPECT_EQ(report->plans(0).offload(), Offload::none);
  // Offload was tried for the layouts that do not fit without it; the
  // explanation says what the fastest of them costs.
  EXPECT_TRUE(HasNote(*report, "offload: the fastest offload plan"))
      << report->notes(0);
  EXPECT_TRUE(HasNote(*report, "over #1"));

  // Pinned, the offload plan exists and is slower by its host step.
  req.job.mutable_constraints()->set_offload(Offload::cpu);
  auto pinned = PlanJob(req);
  ASSERT_TRUE(pinned.ok()) << pinned.status();
  EXPECT_EQ(pinned->plans(0).offload(), Offload::cpu);
  EXPECT_GT(pinned->plans(0).step_time_s(), report->plans(0).step_time_s());
  // Its optimizer states left the GPU (the layouts may differ, and with
  // them the memory per GPU: the split fills each stage's memory).
  EXPECT_EQ(pinned->plans(0).breakdown().optimizer_state_gib(), 0);
  EXPECT_GT(report->plans(0).breakdown().optimizer_state_gib(), 0);
}

TEST(OffloadTest, TooLittleCpuMemoryIsPrunedWithTheReason) {
  PlanRequest req = Request("llama3-70b", 8, 16);
  req.cluster.mutable_host()->set_cpu_memory_gib(512);
  req.cluster.mutable_host()->set_nvme_gib(0);  // no NVMe either
  auto report = PlanJob(req);
  ASSERT_EQ(report.status().code(), absl::StatusCode::kResourceExhausted);
  const std::string msg(report.status().message());
  EXPECT_NE(msg.find("offload cpu pruned"), std::string::npos) << msg;
  EXPECT_NE(msg.find("CPU memory per node, the node has 512"),
            std::string::npos)
      << msg;

  // With NVMe the host keeps only the fp32 gradients: NVMe offload fits,
  // and the explanation still names what CPU offload lacked.
  req.cluster.mutable_host()->set_nvme_gib(28000);
  auto nvme = PlanJob(req);
  ASSERT_TRUE(nvme.ok()) << nvme.status();
  EXPECT_EQ(nvme->plans(0).offload(), Offload::nvme);
  EXPECT_GT(nvme->plans(0).breakdown().nvme_gib_per_node(), 700);
  EXPECT_TRUE(HasNote(*nvme, "offload cpu pruned"));
}

TEST(OffloadTest, PinnedOffloadNeedsAHost) {
  PlanRequest req = Request("llama3-70b", 64, 256);
  req.cluster.clear_host();
  req.job.mutable_constraints()->set_offload(Offload::cpu);
  auto report = PlanJob(req);
  ASSERT_EQ(report.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(std::string(report.status().message()).find("host.cpu_memory_gib"),
            std::string::npos);
  // Without a host, offload is never tried and a model that needs it does
  // not fit, saying why.
  PlanRequest small = Request("llama3-70b", 8, 16);
  small.cluster.clear_host();
  auto none = PlanJob(small);
  ASSERT_EQ(none.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_NE(std::string(none.status().message()).find("offload was not tried"),
            std::string::npos);
}

TEST(OffloadTest, MegatronEmitsCpuOffloadFlags) {
  PlanRequest req = Request("llama3-70b", 16, 32);
  req.megatron_compatible = true;
  req.job.mutable_constraints()->set_offload(Offload::cpu);
  auto report = PlanJob(req);
  ASSERT_TRUE(report.ok()) << report.status();
  EXPECT_TRUE(report->plans(0).distributed_optimizer());
  const std::string flags = EmitMegatron(report->plans(0), req.model);
  EXPECT_NE(flags.find("--optimizer-cpu-offload"), std::string::npos) << flags;
  EXPECT_NE(flags.find("--use-distributed-optimizer"), std::string::npos);

  req.job.mutable_constraints()->set_offload(Offload::nvme);
  EXPECT_EQ(PlanJob(req).status().code(), absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace strata::planner
