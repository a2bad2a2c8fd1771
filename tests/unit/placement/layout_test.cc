#include "placement/layout.h"

#include <map>
#include <set>

#include "gtest/gtest.h"

namespace strata::placement {
namespace {

TEST(NodeOfRanksTest, ContiguousBlocks) {
  RankEnv e;
  e.rank = 5;
  e.world_size = 8;
  e.local_world_size = 4;
  e.local_rank = 1;
  e.node_rank = 1;
  auto node_of = NodeOfRanks(e);
  ASSERT_TRUE(node_of.ok()) << node_of.status();
  EXPECT_EQ(*node_of, (std::vector<int>{0, 0, 0, 0, 1, 1, 1, 1}));
}

TEST(NodeOfRanksTest, InterleavedRanksAreNamed) {
  // mpirun --map-by node: rank 1 is on node 1 with local rank 0.
  RankEnv e;
  e.rank = 1;
  e.world_size = 4;
  e.local_world_size = 2;
  e.node_rank = 1;
  e.local_rank = 0;
  auto s = NodeOfRanks(e).status();
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("NODE_RANK of RANK=1 is 1"), std::string::npos)
      << s;
  e.node_rank = 0;
  s = NodeOfRanks(e).status();
  EXPECT_NE(s.message().find("LOCAL_RANK of RANK=1 is 0"), std::string::npos)
      << s;
}

// The placement lists every rank at its tp-cp-dp-pp coordinates on node
// rank / ranks_per_node, and every group of each kind holds the ranks that
// differ only in that coordinate.
TEST(UniformPlacementTest, RanksAndGroupsFollowTheOrder) {
  auto pl = UniformPlacement(2, 2, 3, 2, 4);  // tp pp dp cp, 24 ranks
  ASSERT_TRUE(pl.ok()) << pl.status();
  ASSERT_EQ(pl->ranks_size(), 24);
  Sizes c;
  c.tp = 2;
  c.pp = 2;
  c.dp = 3;
  c.cp = 2;
  for (int r = 0; r < 24; ++r) {
    const RankPlacement& p = pl->ranks(r);
    const Coord rc = CoordOf(c, r);
    EXPECT_EQ(p.rank(), r);
    EXPECT_EQ(p.node(), r / 4);
    EXPECT_EQ(p.local_gpu(), r % 4);
    EXPECT_EQ(p.tp_rank(), rc.tp);
    EXPECT_EQ(p.cp_rank(), rc.cp);
    EXPECT_EQ(p.dp_rank(), rc.dp);
    EXPECT_EQ(p.pp_rank(), rc.pp);
  }
  std::map<std::string, int> groups, members;
  for (const Group& g : pl->groups()) {
    ++groups[g.kind()];
    members[g.kind()] += g.ranks_size();
    // Members agree on every coordinate but this group's, which is distinct.
    const RankPlacement& a = pl->ranks(g.ranks(0));
    std::set<int> varying;
    for (int m : g.ranks()) {
      const RankPlacement& b = pl->ranks(m);
      if (g.kind() != "tp") {
        EXPECT_EQ(a.tp_rank(), b.tp_rank());
      }
      if (g.kind() != "cp") {
        EXPECT_EQ(a.cp_rank(), b.cp_rank());
      }
      if (g.kind() != "dp") {
        EXPECT_EQ(a.dp_rank(), b.dp_rank());
      }
      if (g.kind() != "pp") {
        EXPECT_EQ(a.pp_rank(), b.pp_rank());
      }
      varying.insert(g.kind() == "tp"   ? b.tp_rank()
                     : g.kind() == "cp" ? b.cp_rank()
                     : g.kind() == "dp" ? b.dp_rank()
                                        : b.pp_rank());
    }
    EXPECT_EQ(static_cast<int>(varying.size()), g.ranks_size());
  }
  EXPECT_EQ(groups["tp"], 12);
  EXPECT_EQ(groups["pp"], 12);
  EXPECT_EQ(groups["dp"], 8);
  EXPECT_EQ(groups["cp"], 12);
  for (const char* kind : {"tp", "pp", "dp", "cp"})
    EXPECT_EQ(members[kind], 24);
}

TEST(UniformPlacementTest, GroupPlacementUsesTheEnvironment) {
  RankEnv e;
  e.world_size = 8;
  e.local_world_size = 2;
  e.tp = 2;
  e.dp = 4;
  auto pl = GroupPlacement(e);
  ASSERT_TRUE(pl.ok()) << pl.status();
  EXPECT_EQ(pl->ranks(7).node(), 3);
  EXPECT_EQ(pl->ranks(7).dp_rank(), 3);
}

TEST(UniformPlacementTest, BadSizesAreInvalidArgument) {
  EXPECT_EQ(UniformPlacement(0, 1, 1, 1, 1).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(UniformPlacement(2, 1, 1, 1, 4).status().code(),
            absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace strata::placement
