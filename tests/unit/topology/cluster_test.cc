#include "topology/cluster.h"

#include <map>

#include "gtest/gtest.h"

namespace strata::topology {
namespace {

TEST(ClusterTest, EveryPresetLoadsAndValidates) {
  std::vector<std::string> names = ClusterPresetNames();
  for (const char* want : {"dgx-a100", "dgx-h100", "h100-roce",
                           "frontier-mi250x", "hetero-ib-roce"}) {
    EXPECT_NE(std::find(names.begin(), names.end(), want), names.end()) << want;
  }
  for (const std::string& name : names) {
    auto c = LoadCluster(name);
    ASSERT_TRUE(c.ok()) << name << ": " << c.status();
    EXPECT_EQ(c->name(), name);
  }
}

TEST(ClusterTest, PresetFactsMatchDatasheets) {
  auto h100 = LoadCluster("dgx-h100");
  ASSERT_TRUE(h100.ok());
  EXPECT_DOUBLE_EQ(h100->gpu().peak_bf16_tflops(), 989);
  EXPECT_EQ(h100->gpus_per_node(), 8);
  EXPECT_EQ(h100->nics(0).count(), 8);
  EXPECT_DOUBLE_EQ(h100->nics(0).gbps(), 400);
  auto mi = LoadCluster("frontier-mi250x");
  ASSERT_TRUE(mi.ok());
  EXPECT_DOUBLE_EQ(mi->gpu().peak_bf16_tflops(), 191.5);
  EXPECT_DOUBLE_EQ(mi->gpu().memory_gib(), 64);
}

TEST(ClusterTest, UnknownPresetListsKnownOnes) {
  auto c = LoadCluster("dgx-z900");
  ASSERT_EQ(c.status().code(), absl::StatusCode::kNotFound);
  EXPECT_NE(c.status().message().find("dgx-h100"), std::string::npos);
}

TEST(ClusterTest, ValidationNamesTheField) {
  ClusterSpec c;
  c.set_name("bad");
  EXPECT_NE(ValidateCluster(c).message().find("'gpu'"), std::string::npos);
  c.mutable_gpu()->set_peak_bf16_tflops(100);
  c.mutable_gpu()->set_memory_gib(-1);
  EXPECT_NE(ValidateCluster(c).message().find("gpu.memory_gib"),
            std::string::npos);
}

TEST(ClusterTest, HeterogeneousSelectionKeepsProportionsAndGroupsClasses) {
  auto c = LoadCluster("hetero-ib-roce");
  ASSERT_TRUE(c.ok());
  auto nodes = SelectNodes(*c, 8);
  ASSERT_TRUE(nodes.ok());
  ASSERT_EQ(nodes->size(), 8u);
  std::map<Nic::Type, int> count;
  for (size_t i = 0; i < nodes->size(); ++i) {
    ++count[(*nodes)[i].nic_type];
    if (i > 0) {
      EXPECT_GE((*nodes)[i].node_class, (*nodes)[i - 1].node_class);
    }
  }
  EXPECT_EQ(count[Nic::ib], 4);
  EXPECT_EQ(count[Nic::roce], 4);
  EXPECT_EQ((*nodes)[4].index, 32);  // first RoCE node of the cluster
  EXPECT_DOUBLE_EQ((*nodes)[0].nic_gbytes_per_gpu, 50);  // 400 Gb/s per GPU
  EXPECT_DOUBLE_EQ((*nodes)[4].nic_gbytes_per_gpu, 25);
}

TEST(ClusterTest, TooFewNodesIsOutOfRange) {
  auto c = LoadCluster("hetero-ib-roce");
  ASSERT_TRUE(c.ok());
  auto nodes = SelectNodes(*c, 65);
  EXPECT_EQ(nodes.status().code(), absl::StatusCode::kOutOfRange);
  EXPECT_NE(nodes.status().message().find("64 nodes"), std::string::npos);
}

TEST(ClusterTest, LeavesFollowNodesPerLeaf) {
  auto c = LoadCluster("h100-roce");
  ASSERT_TRUE(c.ok());
  auto nodes = SelectNodes(*c, 6);
  ASSERT_TRUE(nodes.ok());
  EXPECT_EQ((*nodes)[0].leaf, 0);
  EXPECT_EQ((*nodes)[1].leaf, 0);
  EXPECT_EQ((*nodes)[2].leaf, 1);  // two servers per rack switch
}

}  // namespace
}  // namespace strata::topology
