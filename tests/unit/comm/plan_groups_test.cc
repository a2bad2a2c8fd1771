#include "comm/plan_groups.h"

#include <thread>

#include "gtest/gtest.h"
#include "placement/layout.h"

namespace strata::comm {
namespace {

// 16 ranks, tp=2 pp=2 dp=2 cp=2 on nodes of 8: the placement the planner
// gives such a job on dgx-h100 nodes (planner::BuildPlacement builds its
// ranks and groups with placement::FixedPlacement, as here).
Placement MakePlacement() {
  auto placed = placement::UniformPlacement(2, 2, 2, 2, 8);
  EXPECT_TRUE(placed.ok()) << placed.status();
  return *placed;
}

TEST(PlanGroupsTest, EveryRankBuildsItsGroupsAndTheyReduceTheRightMembers) {
  const Placement pl = MakePlacement();
  const int n = pl.ranks_size();
  ASSERT_EQ(n, 16);
  auto transports = NewInProcessTransports(n);
  std::vector<std::thread> threads;
  std::vector<int> failures(n, 0);
  for (int r = 0; r < n; ++r) {
    std::shared_ptr<Transport> world(std::move(transports[r]));
    threads.emplace_back([&, r, world] {
      auto groups = BuildPlanGroups(world, pl, GroupOptions{});
      if (!groups.ok()) {
        ADD_FAILURE() << groups.status();
        return;
      }
      const RankPlacement& me = pl.ranks(r);
      // Sum each coordinate over each group: the TP group sums tp ranks
      // 0..tp-1 while every other coordinate stays this rank's.
      struct {
        Backend* g;
        int coord;
        int other;
      } checks[] = {{(*groups)->tp.get(), me.tp_rank(), me.dp_rank()},
                    {(*groups)->cp.get(), me.cp_rank(), me.tp_rank()},
                    {(*groups)->dp.get(), me.dp_rank(), me.pp_rank()},
                    {(*groups)->pp.get(), me.pp_rank(), me.cp_rank()}};
      for (auto& c : checks) {
        int64_t v[2] = {c.coord, c.other};
        if (!c.g->AllReduce(v, 2, DataType::kI64, ReduceOp::kSum)
                 ->Wait()
                 .ok()) {
          ++failures[r];
          continue;
        }
        const int size = c.g->size();
        if (v[0] != size * (size - 1) / 2 || v[1] != c.other * size)
          ++failures[r];
      }
    });
  }
  for (auto& t : threads) t.join();
  for (int r = 0; r < n; ++r) EXPECT_EQ(failures[r], 0) << "rank " << r;
}

TEST(PlanGroupsTest, PlacementOfAnotherSizeIsRejected) {
  const Placement pl = MakePlacement();
  auto transports = NewInProcessTransports(4);
  auto groups = BuildPlanGroups(
      std::shared_ptr<Transport>(std::move(transports[0])), pl, GroupOptions{});
  EXPECT_EQ(groups.status().code(), absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace strata::comm
