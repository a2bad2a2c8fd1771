// Megatron's uneven pipeline splits (issue 36 part 2): the layout string,
// first/last stage layers, embedding and loss as pipeline stages, in the
// search and in --fix, and refusals that name the rule that failed.
#include "planner/pipeline_layout.h"

#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "planner/model.h"
#include "planner/search.h"
#include "topology/cluster.h"

namespace strata::planner {
namespace {

ModelSpec Model(int layers, int mtp = 0) {
  ModelSpec m;
  m.set_num_layers(layers);
  m.set_mtp_num_layers(mtp);
  return m;
}

TEST(PipelineLayoutTest, LayoutStringRoundTrips) {
  const std::vector<std::vector<int>> splits = {
      {2, 3, 3, 3, 2}, {5, 6, 6, 7}, {1, 1}, {4, 4, 4, 4}, {3, 5}};
  for (int v : {1, 2, 3}) {
    for (const auto& layers : splits) {
      bool formable = true;
      for (size_t i = 0; i < layers.size(); ++i) {
        formable &= layers[i] >= MinStageLayers(v, layers.size(), i == 0,
                                                i + 1 == layers.size());
      }
      if (!formable) continue;
      int total = 0;
      for (int l : layers) total += l;
      for (int mtp : {0, 1}) {
        const std::string s = LayoutString(layers, v, mtp);
        PlanConstraints fix;
        fix.set_pipeline_layout(s);
        const int p = static_cast<int>(layers.size());
        auto vpp = LayoutVpp(s, p);
        ASSERT_TRUE(vpp.ok()) << s;
        EXPECT_EQ(*vpp, v) << s;
        auto back = PinnedStageLayers(fix, Model(total, mtp), p, v);
        ASSERT_TRUE(back.ok()) << s << ": " << back.status();
        EXPECT_EQ(*back, layers) << s;
      }
    }
  }
  // Megatron-core's example "Ettt|(tt|)*29,m|L" gives the MTP layer a
  // stage of its own before the loss's (mtp_standalone), which strata does
  // not model; with the MTP layer next to the loss it is 3 + 58 layers on
  // 30 stages and a last stage holding only the MTP layer and the loss.
  PlanConstraints fix;
  fix.set_pipeline_layout("Ettt|(tt|)*29,m|L");
  auto standalone = PinnedStageLayers(fix, Model(61, 1), 32, 1);
  ASSERT_FALSE(standalone.ok());
  EXPECT_NE(std::string(standalone.status().message())
                .find("strata runs the MTP layers on the last virtual stage"),
            std::string::npos)
      << standalone.status();
  fix.set_pipeline_layout("Ettt|(tt|)*29,mL");
  auto layers = PinnedStageLayers(fix, Model(61, 1), 31, 1);
  ASSERT_TRUE(layers.ok()) << layers.status();
  EXPECT_EQ((*layers)[0], 3);
  EXPECT_EQ((*layers)[29], 2);
  EXPECT_EQ((*layers)[30], 0);
}

TEST(PipelineLayoutTest, PinnedSplitsFollowMegatronsRules) {
  PlanConstraints f;
  f.set_account_for_embedding(true);
  f.set_account_for_loss(true);
  auto a = PinnedStageLayers(f, Model(94), 32, 3);
  ASSERT_TRUE(a.ok()) << a.status();
  EXPECT_EQ((*a)[0], 2);
  EXPECT_EQ((*a)[1], 3);
  EXPECT_EQ((*a)[31], 2);
  struct Case {
    PlanConstraints fix;
    int layers, p, v;
    const char* message;
  };
  std::vector<Case> cases;
  PlanConstraints first5;
  first5.set_first_stage_layers(5);
  cases.push_back({first5, 32, 4, 3, "--fix first=5: must be above 0 and "
                                     "divide by vpp 3"});
  PlanConstraints middle;
  middle.set_first_stage_layers(3);
  middle.set_last_stage_layers(3);
  cases.push_back({middle, 31, 4, 1,
                   "the other 2 stages hold 25 layers, which must divide by 2 "
                   "stages x vpp 1"});
  cases.push_back({middle, 30, 4, 2, "--fix first=3: must be above 0 and "
                                     "divide by vpp 2"});
  PlanConstraints both = first5;
  both.set_account_for_loss(true);
  cases.push_back({both, 32, 4, 1, "give one"});
  PlanConstraints emb;
  emb.set_account_for_embedding(true);
  cases.push_back({emb, 32, 4, 1, "num_layers 32 + 1 = 33 must divide by pp 4"});
  PlanConstraints bad;
  bad.set_pipeline_layout("Et|tX|L");
  cases.push_back({bad, 2, 3, 1, "invalid layer character 'X'"});
  bad.set_pipeline_layout("tE|t|L");
  cases.push_back({bad, 2, 3, 1, "the embedding 'E' must come first"});
  bad.set_pipeline_layout("Et|t|tL");
  cases.push_back({bad, 2, 3, 1, "3 transformer layers 't' for the model's "
                                 "num_layers 2"});
  bad.set_pipeline_layout("Et|t|L|L");
  cases.push_back({bad, 2, 3, 1, "4 virtual stages do not divide by pp 3"});
  for (const Case& c : cases) {
    auto r = PinnedStageLayers(c.fix, Model(c.layers), c.p, c.v);
    ASSERT_FALSE(r.ok()) << c.message;
    EXPECT_NE(std::string(r.status().message()).find(c.message),
              std::string::npos)
        << r.status().message();
  }
}

// Qwen3-235B (94 layers) at pp 32 vpp 3: 96 virtual stages, as published
// with account_for_embedding/loss_in_pipeline_split. Refused before with
// "pp must be at most the 94 layers".
PlanRequest Qwen3Pp32(const std::string& extra) {
  PlanRequest req;
  req.model = *LoadModel("qwen3-235b-a22b");
  req.cluster = *topology::LoadCluster("dgx-h100");
  req.gpus = 512;
  req.top_k = 1;
  req.with_placement = false;
  req.job.set_global_batch(2048);
  PlanConstraints* f = req.job.mutable_constraints();
  f->set_tp(2);
  f->set_pp(32);
  f->set_ep(8);
  f->set_etp(1);
  f->set_micro_batch(1);
  f->set_precision(Precision::fp8);
  f->set_zero_stage(1);
  f->set_distributed_optimizer(true);
  if (extra == "vpp3") f->set_vpp(3);
  if (extra == "account") {
    f->set_vpp(3);
    f->set_account_for_embedding(true);
    f->set_account_for_loss(true);
  }
  if (extra == "vpp4") f->set_vpp(4);
  return req;
}

TEST(PipelineLayoutTest, EmbeddingAndLossAsStagesInSearchAndFix) {
  for (const char* extra : {"vpp3", "account"}) {
    auto r = PlanJob(Qwen3Pp32(extra));
    ASSERT_TRUE(r.ok()) << extra << ": " << r.status();
    const Plan& p = r->plans(0);
    EXPECT_EQ(p.vpp(), 3);
    ASSERT_EQ(p.layers_per_stage_size(), 32);
    EXPECT_EQ(p.layers_per_stage(0), 2) << extra;
    EXPECT_EQ(p.layers_per_stage(1), 3) << extra;
    EXPECT_EQ(p.layers_per_stage(31), 2) << extra;
  }
  auto r = PlanJob(Qwen3Pp32("vpp4"));
  ASSERT_FALSE(r.ok());
  EXPECT_NE(std::string(r.status().message())
                .find("pp 32 x vpp 4 = 128 virtual stages need a transformer "
                      "layer each, or 126 with the embedding and the loss as "
                      "virtual stages of their own; the model has 94"),
            std::string::npos)
      << r.status().message();
}

TEST(PipelineLayoutTest, RefusalsNameTheRuleThatFailed) {
  struct Case {
    int tp, pp, cp;
    int64_t gpus, batch;
    const char* message;
  };
  const Case cases[] = {
      {3, 1, 1, 24, 24, "tp 3 must divide the 8 GPUs per node"},
      {8, 1, 1, 64, 20, "dp = gpus / (tp cp pp) = 8 must divide the global "
                        "batch 20"},
      {8, 96, 1, 768, 8, "pp 96 exceeds the 80 transformer layers"},
      {8, 4, 1, 48, 8, "tp 8 x cp 1 x pp 4 = 32 must divide the 48 GPUs"},
  };
  for (const Case& c : cases) {
    PlanRequest req;
    req.model = *LoadModel("llama3-70b");
    req.cluster = *topology::LoadCluster("dgx-h100");
    req.gpus = c.gpus;
    req.job.set_global_batch(c.batch);
    req.job.mutable_constraints()->set_tp(c.tp);
    req.job.mutable_constraints()->set_pp(c.pp);
    req.job.mutable_constraints()->set_cp(c.cp);
    auto r = PlanJob(req);
    ASSERT_FALSE(r.ok()) << c.message;
    EXPECT_NE(std::string(r.status().message()).find(c.message),
              std::string::npos)
        << r.status().message();
  }
}

}  // namespace
}  // namespace strata::planner
