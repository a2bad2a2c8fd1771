#include "launch/nodes.h"

#include "gtest/gtest.h"

namespace strata::launch {
namespace {

TEST(RankHostTest, EncodeDecode) {
  RankHost h{"n1", "host-a", "10.0.0.1"};
  RankHost back = RankHost::Decode(h.Encode());
  EXPECT_EQ(back.node_name, "n1");
  EXPECT_EQ(back.hostname, "host-a");
  EXPECT_EQ(back.address, "10.0.0.1");
  back = RankHost::Decode(RankHost{"", "h", ""}.Encode());
  EXPECT_EQ(back.node_name, "");
  EXPECT_EQ(back.hostname, "h");
  EXPECT_EQ(back.address, "");
}

TEST(GroupNodesTest, OneHostBindsLoopback) {
  auto n = GroupNodes({{"", "vm", "192.0.2.2"}, {"", "vm", "192.0.2.2"}});
  ASSERT_TRUE(n.ok()) << n.status();
  EXPECT_TRUE(n->one_host);
  EXPECT_EQ(n->node_of_rank, (std::vector<int>{0, 0}));
  ASSERT_EQ(n->nodes.size(), 1u);
  EXPECT_EQ(n->nodes[0].name, "vm");
  EXPECT_EQ(n->nodes[0].address, "127.0.0.1");
  // A host without a reachable address is fine alone.
  EXPECT_TRUE(GroupNodes({{"", "vm", ""}, {"", "vm", ""}})->one_host);
}

TEST(GroupNodesTest, NodeNamesOnOneHostStillBindLoopback) {
  auto n = GroupNodes({{"a", "vm", "192.0.2.2"},
                       {"b", "vm", "192.0.2.2"},
                       {"a", "vm", "192.0.2.2"},
                       {"b", "vm", "192.0.2.2"}});
  ASSERT_TRUE(n.ok()) << n.status();
  EXPECT_TRUE(n->one_host);
  EXPECT_EQ(n->node_of_rank, (std::vector<int>{0, 1, 0, 1}));
  ASSERT_EQ(n->nodes.size(), 2u);
  EXPECT_EQ(n->nodes[1].name, "b");
  EXPECT_EQ(n->nodes[1].address, "127.0.0.1");
}

TEST(GroupNodesTest, SeveralHostsBindTheirReachableAddress) {
  // Two network namespaces with one hostname: the addresses tell them apart.
  auto n = GroupNodes({{"", "vm", "10.79.0.1"},
                       {"", "vm", "10.79.0.1"},
                       {"", "vm", "10.79.0.2"},
                       {"", "vm", "10.79.0.2"}});
  ASSERT_TRUE(n.ok()) << n.status();
  EXPECT_FALSE(n->one_host);
  EXPECT_EQ(n->node_of_rank, (std::vector<int>{0, 0, 1, 1}));
  ASSERT_EQ(n->nodes.size(), 2u);
  EXPECT_EQ(n->nodes[0].address, "10.79.0.1");
  EXPECT_EQ(n->nodes[1].address, "10.79.0.2");
  EXPECT_EQ(n->nodes[1].name, "vm");
}

TEST(GroupNodesTest, NodesAreNumberedByTheirLowestRank) {
  auto n = GroupNodes({{"", "b", "10.0.0.2"},
                       {"", "a", "10.0.0.1"},
                       {"", "b", "10.0.0.2"},
                       {"", "c", "10.0.0.3"}});
  ASSERT_TRUE(n.ok()) << n.status();
  EXPECT_EQ(n->node_of_rank, (std::vector<int>{0, 1, 0, 2}));
  EXPECT_EQ(n->nodes[0].name, "b");
  EXPECT_EQ(n->nodes[2].address, "10.0.0.3");
}

TEST(GroupNodesTest, AHostWithoutAddressAmongSeveralIsNamed) {
  auto n = GroupNodes({{"", "a", "10.0.0.1"}, {"", "b", ""}});
  ASSERT_EQ(n.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(n.status().message().find("rank 1 (host b) has no non-loopback"),
            std::string::npos)
      << n.status();
}

TEST(GroupNodesTest, OneNodeNameOnTwoHostsIsAnError) {
  auto n = GroupNodes({{"x", "a", "10.0.0.1"}, {"x", "b", "10.0.0.2"}});
  ASSERT_EQ(n.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(n.status().message().find("ranks 0 and 1 have --node-name x"),
            std::string::npos)
      << n.status();
}

TEST(NodesAreContiguousEqualBlocksTest, Layouts) {
  EXPECT_TRUE(NodesAreContiguousEqualBlocks({0, 0, 1, 1}));
  EXPECT_TRUE(NodesAreContiguousEqualBlocks({0}));
  EXPECT_FALSE(NodesAreContiguousEqualBlocks({0, 1, 0, 1}));
  EXPECT_FALSE(NodesAreContiguousEqualBlocks({0, 0, 1}));
  EXPECT_FALSE(NodesAreContiguousEqualBlocks({0, 1, 1, 2}));
  EXPECT_FALSE(NodesAreContiguousEqualBlocks({0, 0, 1, 1, 0, 0}));
}

}  // namespace
}  // namespace strata::launch
