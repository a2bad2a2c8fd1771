#include "placement/order.h"

#include <map>
#include <set>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "placement/layout.h"

namespace strata::placement {
namespace {

// Moved from tests/unit/planner/placement_test.cc with the function.
TEST(OrderTest, CoordinatesFollowTpCpDpPpOrder) {
  Sizes c;
  c.tp = 2;
  c.cp = 2;
  c.dp = 3;
  c.pp = 2;
  // rank 19 = tp 19%2 = 1, cp (19/2)%2 = 1, dp (19/4)%3 = 1, pp 19/12 = 1
  Coord rc = CoordOf(c, 19);
  EXPECT_EQ(rc.tp, 1);
  EXPECT_EQ(rc.cp, 1);
  EXPECT_EQ(rc.dp, 1);
  EXPECT_EQ(rc.pp, 1);
}

TEST(OrderTest, RankOfInvertsCoordOf) {
  const Sizes s{.tp = 3, .cp = 2, .dp = 5, .pp = 4};
  for (int64_t r = 0; r < s.Ranks(); ++r) {
    EXPECT_EQ(RankOf(s, CoordOf(s, r)), r);
  }
  EXPECT_EQ(RankOf(s, {.tp = 2, .cp = 1, .dp = 4, .pp = 3}), s.Ranks() - 1);
}

// Every rank is in exactly one group of each kind, groups of a kind are
// numbered 0.. and member i has coordinate i along the group's kind.
TEST(OrderTest, GroupsCoverEveryRankOnce) {
  const Sizes s{.tp = 2, .cp = 1, .dp = 3, .pp = 2};
  Placement pl;
  AddGroups(s, &pl);
  std::map<std::string, std::multiset<int>> seen;
  std::map<std::string, int> next_index;
  for (const Group& g : pl.groups()) {
    EXPECT_EQ(g.index(), next_index[g.kind()]++) << g.kind();
    EXPECT_TRUE(g.nic_type().empty());
    for (int i = 0; i < g.ranks_size(); ++i) {
      const Coord c = CoordOf(s, g.ranks(i));
      const int along = g.kind() == "tp"   ? c.tp
                        : g.kind() == "cp" ? c.cp
                        : g.kind() == "dp" ? c.dp
                                           : c.pp;
      EXPECT_EQ(along, i) << g.kind() << " group " << g.index();
      seen[g.kind()].insert(g.ranks(i));
    }
  }
  EXPECT_EQ(next_index["tp"], 6);
  EXPECT_EQ(next_index["cp"], 12);  // one-member groups
  EXPECT_EQ(next_index["dp"], 4);
  EXPECT_EQ(next_index["pp"], 6);
  for (const char* kind : {"tp", "cp", "dp", "pp"}) {
    ASSERT_EQ(seen[kind].size(), 12u) << kind;
    for (int r = 0; r < 12; ++r) EXPECT_EQ(seen[kind].count(r), 1u) << kind;
  }
}

// Ranks on interleaved nodes (mpirun --map-by node): local GPUs count each
// node's ranks in rank order, stages list their nodes, NIC types as asked.
TEST(FixedPlacementTest, InterleavedNodesAndNicType) {
  const Sizes s{.tp = 1, .cp = 1, .dp = 2, .pp = 2};
  auto pl = FixedPlacement(s, {0, 1, 0, 1}, "ethernet");
  ASSERT_TRUE(pl.ok()) << pl.status();
  EXPECT_EQ(pl->order(), "tp-cp-dp-pp");
  std::vector<int> local;
  for (const RankPlacement& p : pl->ranks()) local.push_back(p.local_gpu());
  EXPECT_EQ(local, (std::vector<int>{0, 0, 1, 1}));
  ASSERT_EQ(pl->stages_size(), 2);
  EXPECT_EQ(pl->stages(1).pp_rank(), 1);
  EXPECT_EQ(pl->stages(1).nodes_size(), 2);
  EXPECT_EQ(pl->stages(1).nic_type(), "ethernet");
  for (const Group& g : pl->groups()) EXPECT_EQ(g.nic_type(), "ethernet");
}

TEST(FixedPlacementTest, BadInputIsInvalidArgument) {
  const Sizes s{.tp = 2, .cp = 1, .dp = 1, .pp = 1};
  EXPECT_EQ(FixedPlacement(s, {0}).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(FixedPlacement(s, {0, -1}).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(FixedPlacement(Sizes{.tp = 0}, {}).status().code(),
            absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace strata::placement
