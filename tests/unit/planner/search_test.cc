#include "planner/search.h"

#include "common/config.h"
#include "gtest/gtest.h"
#include "planner/cost_model.h"
#include "planner/model.h"
#include "planner/network.h"
#include "planner/search_space.h"
#include "topology/cluster.h"

namespace strata::planner {
namespace {

PlanRequest Request(const char* model, const char* cluster, int gpus,
                    int batch) {
  PlanRequest req;
  req.model = *LoadModel(model);
  req.cluster = *topology::LoadCluster(cluster);
  req.gpus = gpus;
  req.job.set_global_batch(batch);
  return req;
}

TEST(SearchTest, TopKIsSortedAndEveryPlanFitsAndUsesAllGpus) {
  PlanRequest req = Request("llama3-70b", "dgx-h100", 64, 256);
  req.top_k = 7;
  auto report = PlanJob(req);
  ASSERT_TRUE(report.ok()) << report.status();
  ASSERT_EQ(report->plans_size(), 7);
  EXPECT_GT(report->search().candidates(), report->search().feasible());
  EXPECT_GT(report->search().feasible(), 7);
  for (int i = 0; i < report->plans_size(); ++i) {
    const Plan& p = report->plans(i);
    EXPECT_EQ(p.tp() * p.pp() * p.dp() * p.cp(), 64);
    EXPECT_EQ(p.micro_batch() * p.num_microbatches() * p.dp(), 256);
    EXPECT_LE(p.memory_gib_per_gpu(), 80);
    EXPECT_GT(p.mfu(), 0.1);
    EXPECT_LT(p.mfu(), 0.8);
    EXPECT_NEAR(p.tokens_per_s(), 256.0 * 8192 / p.step_time_s(), 1e-6);
    if (i > 0) {
      EXPECT_GE(p.step_time_s(), report->plans(i - 1).step_time_s());
    }
  }
  EXPECT_TRUE(report->plans(0).has_placement());
  EXPECT_FALSE(report->plans(1).has_placement());
}

TEST(SearchTest, FixPinsEveryDimension) {
  PlanRequest req = Request("llama3-70b", "dgx-h100", 64, 256);
  PlanConstraints* fix = req.job.mutable_constraints();
  fix->set_tp(8);
  fix->set_pp(4);
  fix->set_cp(1);
  fix->set_vpp(5);
  fix->set_micro_batch(1);
  fix->set_zero_stage(1);
  fix->set_recompute(Recompute::full);
  auto report = PlanJob(req);
  ASSERT_TRUE(report.ok()) << report.status();
  for (const Plan& p : report->plans()) {
    EXPECT_EQ(p.tp(), 8);
    EXPECT_EQ(p.pp(), 4);
    EXPECT_EQ(p.dp(), 2);
    EXPECT_EQ(p.vpp(), 5);
    EXPECT_EQ(p.micro_batch(), 1);
    EXPECT_EQ(p.zero_stage(), 1);
    EXPECT_EQ(p.recompute(), Recompute::full);
  }
}

TEST(SearchTest, ModelThatFitsNowhereNamesClosestCandidate) {
  // 405B on 8 GPUs: even ZeRO-3 needs more than 80 GiB per GPU.
  auto report = PlanJob(Request("llama3-405b", "dgx-h100", 8, 8));
  ASSERT_EQ(report.status().code(), absl::StatusCode::kResourceExhausted);
  const std::string msg(report.status().message());
  EXPECT_NE(msg.find("the closest"), std::string::npos) << msg;
  EXPECT_NE(msg.find("GiB per GPU, has 80"), std::string::npos) << msg;
}

// The search's shards (one per thread) merge into the report a single
// pass gives: the same plans, counts, offload notes and, when nothing
// fits, the same closest candidate (the first one on ties).
TEST(SearchTest, ThreadsDoNotChangeTheReport) {
  const PlanRequest requests[] = {
      Request("mixtral-8x7b", "dgx-h100", 128, 512),
      Request("llama3-70b", "hetero-ib-roce", 32, 64),
      Request("llama3-405b", "dgx-h100", 8, 8),  // fits nowhere
  };
  // Scoring every candidate, the report is byte for byte the same; with
  // branch and bound, which candidates each thread skips depends on what
  // it has kept, so only the counts of scored candidates may differ.
  for (bool bound : {false, true})
  for (PlanRequest req : requests) {
    req.top_k = 8;
    req.time_budget_s = 600;
    req.search_threads = 1;
    req.branch_and_bound = bound;
    auto one = PlanJob(req);
    for (int threads : {2, 3, 4}) {
      req.search_threads = threads;
      auto many = PlanJob(req);
      ASSERT_EQ(one.ok(), many.ok()) << req.model.name() << " " << threads;
      if (!one.ok()) {
        EXPECT_EQ(one.status(), many.status());
        continue;
      }
      PlanReport a = *one, b = *many;
      a.mutable_search()->clear_elapsed_s();
      b.mutable_search()->clear_elapsed_s();
      if (bound) {
        EXPECT_GT(a.search().candidates(), 0);
        for (PlanReport* r : {&a, &b}) {
          r->mutable_search()->clear_candidates();
          r->mutable_search()->clear_feasible();
        }
      }
      EXPECT_EQ(a.SerializeAsString(), b.SerializeAsString())
          << req.model.name() << " on " << threads << " threads";
      if (!bound) EXPECT_GT(a.search().candidates(), 0);
    }
  }
}

// Branch and bound skips candidates whose lower bound cannot enter the top
// K: the plans and their placement are the ones scoring every candidate
// gives, and fewer candidates are scored.
TEST(SearchTest, BranchAndBoundDoesNotChangeThePlans) {
  PlanRequest moe = Request("deepseek-v3", "dgx-h100", 2048, 2048);
  moe.job.set_seq_length(4096);
  const PlanRequest requests[] = {
      Request("mixtral-8x7b", "dgx-h100", 128, 512),
      Request("llama3-70b", "hetero-ib-roce", 32, 64),
      Request("llama3-405b", "dgx-h100", 1024, 1024),
      Request("gpt-1.7b", "dgx-a100", 32, 512),
      moe,
  };
  bool pruned_some = false;
  for (PlanRequest req : requests) {
    req.top_k = 8;
    req.time_budget_s = 600;
    req.branch_and_bound = false;
    auto all = PlanJob(req);
    req.branch_and_bound = true;
    auto bounded = PlanJob(req);
    ASSERT_TRUE(all.ok()) << all.status();
    ASSERT_TRUE(bounded.ok()) << bounded.status();
    ASSERT_EQ(all->plans_size(), bounded->plans_size());
    for (int i = 0; i < all->plans_size(); ++i) {
      EXPECT_EQ(all->plans(i).SerializeAsString(),
                bounded->plans(i).SerializeAsString())
          << req.model.name() << " plan " << i;
    }
    EXPECT_LE(bounded->search().candidates(), all->search().candidates());
    pruned_some |= bounded->search().candidates() < all->search().candidates();
  }
  EXPECT_TRUE(pruned_some);
}

// The bound the search skips by is below every candidate's step (dense,
// MoE, FP8, with offload twins and a calibration-free cluster).
TEST(SearchTest, StepLowerBoundIsBelowEveryStep) {
  PlanRequest moe = Request("qwen3-30b-a3b", "dgx-h100", 64, 512);
  moe.job.set_seq_length(4096);
  moe.job.mutable_constraints()->set_precision(Precision::fp8);
  const PlanRequest requests[] = {
      Request("llama3-70b", "dgx-h100", 64, 256), moe,
      Request("gpt-1.7b", "dgx-a100", 32, 512),
      Request("mixtral-8x7b", "h100-roce", 64, 256)};
  for (const PlanRequest& req : requests) {
    const int gpn = req.cluster.gpus_per_node();
    auto nodes = topology::SelectNodes(
        req.cluster, static_cast<int>((req.gpus + gpn - 1) / gpn));
    ASSERT_TRUE(nodes.ok()) << nodes.status();
    const Network net(req.cluster, *std::move(nodes));
    const CostModel cost(req.model, req.job, net);
    const search_internal::SearchSpace space(req, cost.seq_length());
    int64_t checked = 0;
    space.ForEach([&](const Candidate& c) {
      Evaluation e;
      cost.Evaluate(c, &e, false);
      if (e.valid) {
        ++checked;
        EXPECT_LE(cost.StepLowerBound(c), e.step_s * (1 + 1e-12))
            << req.model.name() << " " << c.ToString();
      }
      return true;
    });
    EXPECT_GT(checked, 100) << req.model.name();
  }
}

TEST(SearchTest, ImpossibleRequestsAreInvalidArgument) {
  // Batch 3 on 64 GPUs: no dp divides it once tp*pp*cp <= ... and heads.
  auto bad_batch = PlanJob(Request("llama3-8b", "dgx-h100", 64, 0));
  EXPECT_EQ(bad_batch.status().code(), absl::StatusCode::kInvalidArgument);
  auto too_many = PlanJob(Request("llama3-8b", "hetero-ib-roce", 1024, 512));
  EXPECT_EQ(too_many.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(too_many.status().message().find("has 512 GPUs"),
            std::string::npos);
  // 7 GPUs: tp must divide 8 and the heads, pp <= layers; a prime GPU count
  // larger than the layers leaves nothing once dp must divide the batch.
  PlanRequest req = Request("llama3-8b", "dgx-h100", 37, 64);
  auto prime = PlanJob(req);
  EXPECT_EQ(prime.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(prime.status().message().find("uses exactly 37 GPUs"),
            std::string::npos)
      << prime.status();
  req = Request("llama3-8b", "dgx-h100", 64, 64);
  req.job.mutable_constraints()->set_tp(3);
  EXPECT_EQ(PlanJob(req).status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(SearchTest, MegatronCompatibleSearchAvoidsZero2And3) {
  PlanRequest req = Request("llama3-70b", "dgx-h100", 64, 256);
  req.megatron_compatible = true;
  req.top_k = 20;
  auto report = PlanJob(req);
  ASSERT_TRUE(report.ok());
  for (const Plan& p : report->plans()) {
    EXPECT_TRUE(p.zero_stage() == 0 || p.distributed_optimizer());
  }
}

TEST(SearchTest, JsonHasTheDocumentedShape) {
  PlanRequest req = Request("llama3-8b", "dgx-h100", 16, 64);
  req.top_k = 2;
  auto report = PlanJob(req);
  ASSERT_TRUE(report.ok());
  const std::string json = MessageToJson(*report);
  for (const char* key :
       {"\"plans\"", "\"tp\"", "\"pp\"", "\"dp\"", "\"cp\"", "\"vpp\"",
        "\"micro_batch\"", "\"zero_stage\"", "\"recompute\"", "\"step_time_s\"",
        "\"tokens_per_s\"", "\"tflops_per_gpu\"", "\"mfu\"",
        "\"memory_gib_per_gpu\"", "\"breakdown\"", "\"search\"",
        "\"candidates\"", "\"feasible\"", "\"elapsed_s\""}) {
    EXPECT_NE(json.find(key), std::string::npos) << key;
  }
}

TEST(SearchTest, SixteenThousandGpuSearchIsFast) {
  // The benchmark (bench/plan_bench.cc) measures this; here only a loose
  // bound so a pathological slowdown fails the suite.
  PlanRequest req = Request("llama3-405b", "dgx-h100", 16384, 2048);
  req.with_placement = false;
  auto report = PlanJob(req);
  ASSERT_TRUE(report.ok()) << report.status();
  EXPECT_LT(report->search().elapsed_s(), 5.0);
  EXPECT_GT(report->search().candidates(), 1000);
}

TEST(SearchTest, TopKIsAPrefixOfALargerTopK) {
  // One comparator orders plans totally (step time, memory, configuration),
  // so asking for fewer plans returns the first ones of a longer list.
  PlanRequest req = Request("llama3-70b", "dgx-h100", 64, 256);
  req.with_placement = false;
  req.top_k = 40;
  auto wide = PlanJob(req);
  ASSERT_TRUE(wide.ok()) << wide.status();
  ASSERT_EQ(wide->plans_size(), 40);
  for (int k : {1, 3, 17}) {
    req.top_k = k;
    auto narrow = PlanJob(req);
    ASSERT_TRUE(narrow.ok()) << narrow.status();
    ASSERT_EQ(narrow->plans_size(), k);
    for (int i = 0; i < k; ++i) {
      EXPECT_EQ(MessageToJson(narrow->plans(i)), MessageToJson(wide->plans(i)))
          << "k=" << k << " plan " << i;
    }
  }
}

TEST(SearchTest, ExhaustedTimeBudgetReturnsTheBestSoFar) {
  PlanRequest req = Request("llama3-8b", "dgx-h100", 64, 256);
  req.with_placement = false;
  auto full = PlanJob(req);
  ASSERT_TRUE(full.ok()) << full.status();
  ASSERT_GT(full->search().candidates(), kBudgetCheckInterval);
  EXPECT_FALSE(full->search().budget_exceeded());
  // A budget of 0 stops each of the search's threads at its first look at
  // the clock, after exactly kBudgetCheckInterval evaluations.
  req.time_budget_s = 0;
  req.search_threads = 2;
  auto cut = PlanJob(req);
  ASSERT_TRUE(cut.ok()) << cut.status();
  EXPECT_LE(cut->search().candidates(), 2 * kBudgetCheckInterval);
  EXPECT_TRUE(cut->search().budget_exceeded());
  EXPECT_LT(cut->search().candidates(), full->search().candidates());
  ASSERT_GT(cut->plans_size(), 0);
  for (int i = 1; i < cut->plans_size(); ++i) {
    EXPECT_GE(cut->plans(i).step_time_s(), cut->plans(i - 1).step_time_s());
  }
  // The best of a partial search is never better than the exhaustive best.
  EXPECT_GE(cut->plans(0).step_time_s(), full->plans(0).step_time_s());
}

TEST(SearchTest, ExhaustedTimeBudgetWithNothingFittingIsDeadlineExceeded) {
  PlanRequest req = Request("llama3-405b", "dgx-h100", 8, 8);
  req.time_budget_s = 0;
  auto report = PlanJob(req);
  ASSERT_EQ(report.status().code(), absl::StatusCode::kDeadlineExceeded)
      << report.status();
  EXPECT_NE(report.status().message().find("--time-budget"), std::string::npos)
      << report.status();
  req.time_budget_s = -1;
  EXPECT_EQ(PlanJob(req).status().code(), absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace strata::planner
