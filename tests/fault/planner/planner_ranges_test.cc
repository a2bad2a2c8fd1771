// Out-of-range numbers in model, cluster and job files and in plan
// requests: each is an InvalidArgument naming the field, the value and the
// documented range (common/field_range.h), before any search or allocation
// sized by it; and the largest accepted inputs plan within the default
// time budget without overflowing.
#include <gtest/gtest.h>

#include <chrono>
#include <cmath>
#include <string>

#include "common/config.h"
#include "planner/job.h"
#include "planner/model.h"
#include "planner/search.h"
#include "topology/cluster.h"

namespace strata::planner {
namespace {

void ExpectRangeError(const Status& st, const std::string& field,
                      const std::string& value, const std::string& range) {
  ASSERT_EQ(st.code(), absl::StatusCode::kInvalidArgument) << st;
  const std::string m(st.message());
  EXPECT_NE(m.find(field), std::string::npos) << m;
  EXPECT_NE(m.find(value), std::string::npos) << m;
  EXPECT_NE(m.find(range), std::string::npos) << m;
}

constexpr char kCluster[] = R"(name: c
gpu: {name: g, peak_bf16_tflops: 1000, memory_gib: 100000,
      gemm_efficiency: 0.7, hbm_gbps: 3000}
gpus_per_node: 8
intra_node_gbps: 450
nics: [{count: 8, gbps: 400}]
network: {nodes_per_leaf: 32, leaves_per_pod: 4}
)";

ClusterSpec ParseCluster(const std::string& extra, Status* st) {
  ClusterSpec c;
  *st = ParseConfig(std::string(kCluster) + extra, "c.yaml", &c,
                    topology::ClusterRanges());
  if (st->ok()) *st = topology::ValidateCluster(c);
  return c;
}

PlanRequest Request(int64_t gpus, int64_t batch) {
  PlanRequest req;
  auto model = LoadModel("llama3-8b");
  EXPECT_TRUE(model.ok()) << model.status();
  req.model = *model;
  Status st;
  req.cluster = ParseCluster("", &st);
  EXPECT_TRUE(st.ok()) << st;
  req.gpus = gpus;
  req.job.set_global_batch(batch);
  return req;
}

TEST(PlannerRangesTest, GlobalBatchOf2To32IsRejectedNotADivisionByZero) {
  // Used to truncate to int and divide by zero (SIGFPE).
  PlanRequest req = Request(8, int64_t{1} << 32);
  ExpectRangeError(PlanJob(req).status(), "global_batch", "4294967296",
                   "[1, 16777216]");
}

TEST(PlannerRangesTest, HugeClusterNodeCountIsRejectedBeforeAllocating) {
  Status st;
  ParseCluster("num_nodes: 2147483647\n", &st);  // was std::bad_alloc
  ExpectRangeError(st, "num_nodes", "2147483647", "[1, 131072]");
  ParseCluster("num_nodes: 100000000\n", &st);  // was 4.7 GB
  ExpectRangeError(st, "num_nodes", "100000000", "[1, 131072]");
}

TEST(PlannerRangesTest, ExplicitZerosAreRejectedAbsentFieldsKeepDefaults) {
  Status st;
  ParseCluster("num_nodes: 0\n", &st);
  ExpectRangeError(st, "num_nodes", "= 0", "[1, 131072]");
  ClusterSpec c = ParseCluster("", &st);
  ASSERT_TRUE(st.ok()) << st;
  c.mutable_network()->set_nodes_per_leaf(0);
  ExpectRangeError(topology::ValidateCluster(c), "network.nodes_per_leaf",
                   "= 0", "[1, 131072]");
  c = ParseCluster("", &st);
  c.mutable_network()->set_oversubscription(0);
  ExpectRangeError(topology::ValidateCluster(c), "network.oversubscription",
                   "= 0", "[1, 1000]");
  JobSpec job;
  st = ParseConfig("launch: {nodes: 0}\n", "j.yaml", &job, JobRanges());
  ExpectRangeError(st, "launch.nodes", "= 0", "[1, 131072]");
  job.Clear();
  job.mutable_launch()->set_nodes(0);
  ExpectRangeError(ValidateJob(job, "j.yaml"), "launch.nodes", "= 0",
                   "[1, 131072]");
}

TEST(PlannerRangesTest, ModelFieldsHaveRanges) {
  ModelSpec m;
  m.set_name("m");
  m.set_num_layers(10000000);  // searched for over a minute
  m.set_hidden_size(64);
  m.set_num_attention_heads(1);
  m.set_vocab_size(10);
  ExpectRangeError(NormalizeModel(&m), "num_layers", "10000000", "[1, 4096]");
  m.set_num_layers(2);
  m.set_seq_length(0);
  ExpectRangeError(NormalizeModel(&m), "seq_length", "= 0", "[1, 1048576]");
  Status st = ParseConfig("hidden_size: 9223372036854775808\n", "m.yaml", &m,
                          ModelRanges());
  ExpectRangeError(st, "hidden_size", "9223372036854775808", "[1, 262144]");
}

TEST(PlannerRangesTest, PlanRequestValuesHaveRanges) {
  PlanRequest req = Request(8, 8);
  req.job.set_seq_length(0);  // `--seq 0` used to mean "the model's"
  ExpectRangeError(PlanJob(req).status(), "seq_length", "= 0", "[1, 1048576]");
  req = Request(1 << 20, 8);
  ExpectRangeError(PlanJob(req).status(), "--gpus", "1048576", "[1, 131072]");
  req = Request(8, 8);
  req.time_budget_s = std::nan("");
  ExpectRangeError(PlanJob(req).status(), "--time-budget", "nan", "[0, 3600]");
  req = Request(8, 8);
  req.job.mutable_constraints()->set_micro_batch(0);
  ExpectRangeError(PlanJob(req).status(), "constraints.micro_batch", "= 0",
                   "[1, 16777216]");
}

// The largest accepted shapes: products of sizes stay finite (no int
// overflow), and the search returns within its default budget.
TEST(PlannerRangesTest, LargestAcceptedInputsPlanWithinTheBudget) {
  ModelSpec m;
  m.set_name("max");
  m.set_num_layers(kMaxLayers);
  m.set_hidden_size(262144);
  m.set_num_attention_heads(65536);
  m.set_ffn_hidden_size(1048576);
  m.set_vocab_size(16777216);
  m.set_seq_length(kMaxSeqLength);
  ASSERT_TRUE(NormalizeModel(&m).ok());
  const ParamCount p = CountParameters(m, kMaxSeqLength);
  EXPECT_TRUE(std::isfinite(p.Total(kMaxLayers)));
  EXPECT_GT(p.Total(kMaxLayers), 1e15);
  const StepFlops f =
      TrainingFlops(m, kMaxGlobalBatch, kMaxSeqLength, Recompute::full);
  EXPECT_TRUE(std::isfinite(f.Hardware()));

  PlanRequest req = Request(kMaxGpus, 14414400);  // 504 divisors
  req.model = m;
  req.top_k = 1;
  const auto start = std::chrono::steady_clock::now();
  auto report = PlanJob(req);
  const double s =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start)
          .count();
  EXPECT_TRUE(report.ok() || absl::IsResourceExhausted(report.status()) ||
              absl::IsDeadlineExceeded(report.status()))
      << report.status();
  // The default budget (1 s) plus building the 131072-rank placement, with
  // headroom for a loaded CI machine.
  EXPECT_LT(s, 10.0);
}

}  // namespace
}  // namespace strata::planner
