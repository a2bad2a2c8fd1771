#include "launch/rank_env.h"

#include <algorithm>

#include "planner/placement.h"
#include "gtest/gtest.h"

namespace strata::launch {
namespace {

TEST(DeriveParallelSizesTest, DpIsWhatIsLeft) {
  auto s = DeriveParallelSizes(16, 2, 2, 2);
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_EQ(s->tp, 2);
  EXPECT_EQ(s->pp, 2);
  EXPECT_EQ(s->cp, 2);
  EXPECT_EQ(s->dp, 2);
  EXPECT_EQ(DeriveParallelSizes(4, 1, 1, 1)->dp, 4);
}

TEST(DeriveParallelSizesTest, IndivisibleWorldNamesTheFlags) {
  auto s = DeriveParallelSizes(4, 3, 1, 1);
  ASSERT_EQ(s.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(s.status().message().find("world size 4"), std::string::npos);
  EXPECT_NE(s.status().message().find("--tp 3"), std::string::npos);
  EXPECT_FALSE(DeriveParallelSizes(4, 0, 1, 1).ok());
  EXPECT_FALSE(DeriveParallelSizes(4, 1, -2, 1).ok());
}

TEST(ComputeLocalityTest, ContiguousBlocks) {
  std::vector<std::string> nodes = {"a", "a", "b", "b"};
  Locality l = ComputeLocality(nodes, 3);
  EXPECT_EQ(l.node_rank, 1);
  EXPECT_EQ(l.num_nodes, 2);
  EXPECT_EQ(l.local_rank, 1);
  EXPECT_EQ(l.local_world_size, 2);
}

TEST(ComputeLocalityTest, InterleavedAndUneven) {
  // Round-robin mapping (mpirun --map-by node) with a third, smaller node.
  std::vector<std::string> nodes = {"b", "a", "b", "a", "c"};
  EXPECT_EQ(ComputeLocality(nodes, 0).node_rank, 0);  // "b" has rank 0
  EXPECT_EQ(ComputeLocality(nodes, 1).node_rank, 1);
  EXPECT_EQ(ComputeLocality(nodes, 2).local_rank, 1);
  EXPECT_EQ(ComputeLocality(nodes, 3).local_rank, 1);
  EXPECT_EQ(ComputeLocality(nodes, 4).node_rank, 2);
  EXPECT_EQ(ComputeLocality(nodes, 4).local_world_size, 1);
  EXPECT_EQ(ComputeLocality(nodes, 4).num_nodes, 3);
}

TEST(ComputeLocalityTest, ContiguousEqualBlocks) {
  EXPECT_TRUE(NodesAreContiguousEqualBlocks({"a", "a", "b", "b"}));
  EXPECT_TRUE(NodesAreContiguousEqualBlocks({"a"}));
  EXPECT_FALSE(NodesAreContiguousEqualBlocks({"a", "b", "a", "b"}));
  EXPECT_FALSE(NodesAreContiguousEqualBlocks({"a", "a", "b"}));
  EXPECT_FALSE(NodesAreContiguousEqualBlocks({"a", "b", "b", "c"}));
  // Same node name reappearing after another node's block.
  EXPECT_FALSE(NodesAreContiguousEqualBlocks({"a", "a", "b", "b", "a", "a"}));
}

TEST(RankVariablesTest, EveryContractVariable) {
  RankEnvInputs in;
  in.rank = 5;
  in.world_size = 8;
  in.locality = {1, 2, 1, 4};
  in.sizes = {2, 2, 1, 2};  // tp pp dp cp
  in.master_addr = "10.0.0.1";
  in.master_port = 29500;
  in.store = "tcp://10.0.0.1:29400";
  in.job_id = "job-7";
  in.node_name = "host-b";
  in.node_addr = "10.0.0.2";
  auto v = RankVariables(in);
  EXPECT_EQ(v["RANK"], "5");
  EXPECT_EQ(v["WORLD_SIZE"], "8");
  EXPECT_EQ(v["LOCAL_RANK"], "1");
  EXPECT_EQ(v["LOCAL_WORLD_SIZE"], "4");
  EXPECT_EQ(v["GROUP_RANK"], "1");
  EXPECT_EQ(v["NODE_RANK"], "1");
  EXPECT_EQ(v["GROUP_WORLD_SIZE"], "2");
  EXPECT_EQ(v["MASTER_ADDR"], "10.0.0.1");
  EXPECT_EQ(v["MASTER_PORT"], "29500");
  EXPECT_EQ(v["STRATA_STORE"], "tcp://10.0.0.1:29400");
  EXPECT_EQ(v["STRATA_JOB_ID"], "job-7");
  EXPECT_EQ(v["STRATA_RESTART_COUNT"], "0");
  EXPECT_EQ(v["STRATA_NODE_NAME"], "host-b");
  EXPECT_EQ(v["STRATA_NODE_ADDR"], "10.0.0.2");
  EXPECT_EQ(v.count("STRATA_CKPT_URI"), 0u);
  // rank 5 = tp 1 + 2 * (cp 0 + 2 * (dp 0 + 1 * pp 1)): tp-cp-dp-pp order.
  EXPECT_EQ(v["STRATA_TP"], "2");
  EXPECT_EQ(v["STRATA_CP"], "2");
  EXPECT_EQ(v["STRATA_DP"], "1");
  EXPECT_EQ(v["STRATA_PP"], "2");
  EXPECT_EQ(v["STRATA_TP_RANK"], "1");
  EXPECT_EQ(v["STRATA_CP_RANK"], "0");
  EXPECT_EQ(v["STRATA_DP_RANK"], "0");
  EXPECT_EQ(v["STRATA_PP_RANK"], "1");
  in.ckpt_uri = "file:///ckpt";
  EXPECT_EQ(RankVariables(in)["STRATA_CKPT_URI"], "file:///ckpt");
}

TEST(RankVariablesTest, CoordinatesMatchThePlannerForEveryRank) {
  RankEnvInputs in;
  in.world_size = 24;
  in.sizes = {2, 3, 2, 2};
  planner::Candidate c;
  c.tp = 2;
  c.pp = 3;
  c.dp = 2;
  c.cp = 2;
  for (int r = 0; r < 24; ++r) {
    in.rank = r;
    auto v = RankVariables(in);
    planner::RankCoord rc = planner::CoordOf(c, r);
    EXPECT_EQ(v["STRATA_TP_RANK"], std::to_string(rc.tp)) << r;
    EXPECT_EQ(v["STRATA_CP_RANK"], std::to_string(rc.cp)) << r;
    EXPECT_EQ(v["STRATA_DP_RANK"], std::to_string(rc.dp)) << r;
    EXPECT_EQ(v["STRATA_PP_RANK"], std::to_string(rc.pp)) << r;
  }
}

TEST(ChildEnvironmentTest, DropsMpiIdentityAndOverrides) {
  std::vector<std::string> inherited = {"PATH=/usr/bin",
                                        "OMPI_COMM_WORLD_RANK=3",
                                        "PMIX_RANK=3",
                                        "RANK=99",
                                        "STRATA_PLAN=/old.json",
                                        "STRATA_CKPT_URI=file:///x",
                                        "HOME=/root",
                                        "MALFORMED"};
  auto env = ChildEnvironment(inherited, {{"RANK", "3"}, {"WORLD_SIZE", "4"}});
  auto has = [&](const std::string& kv) {
    return std::find(env.begin(), env.end(), kv) != env.end();
  };
  EXPECT_TRUE(has("PATH=/usr/bin"));
  EXPECT_TRUE(has("HOME=/root"));
  EXPECT_TRUE(has("STRATA_CKPT_URI=file:///x"));
  EXPECT_TRUE(has("RANK=3"));
  EXPECT_TRUE(has("WORLD_SIZE=4"));
  EXPECT_FALSE(has("RANK=99"));
  EXPECT_FALSE(has("OMPI_COMM_WORLD_RANK=3"));
  EXPECT_FALSE(has("PMIX_RANK=3"));
  EXPECT_FALSE(has("STRATA_PLAN=/old.json"));
  EXPECT_FALSE(has("MALFORMED"));
}

}  // namespace
}  // namespace strata::launch
