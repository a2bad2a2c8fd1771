#include "fault/wavefront.h"

#include "gtest/gtest.h"

namespace strata::fault {
namespace {

TEST(WavefrontTest, NamesTheRankThatNeverEntered) {
  // dp0 = {0, 1, 2, 3}; rank 3 was stopped before all_reduce #12.
  std::vector<GroupProgress> p = {
      {0, "dp0", 12, 11, "all_reduce"}, {1, "dp0", 12, 11, "all_reduce"},
      {2, "dp0", 12, 11, "all_reduce"}, {3, "dp0", 11, 11, "all_reduce"}};
  Wavefront w = ComputeWavefront(p);
  ASSERT_EQ(w.groups.size(), 1u);
  EXPECT_EQ(w.groups[0].seq, 12);
  EXPECT_EQ(w.groups[0].op, "all_reduce");
  EXPECT_EQ(w.groups[0].waiting, (std::vector<int>{0, 1, 2}));
  EXPECT_EQ(w.groups[0].missing, (std::vector<int>{3}));
  EXPECT_EQ(w.culprits, (std::vector<int>{3}));
  EXPECT_NE(DescribeWavefront(w).find("never entered 3"), std::string::npos);
}

TEST(WavefrontTest, ARankWaitingElsewhereIsAVictimNotTheCulprit) {
  // Pipeline: rank 1 (stage 1) never entered dp1's all_reduce because it
  // waits in pp0's recv from rank 0, which is stuck before sending.
  std::vector<GroupProgress> p = {
      {1, "pp0", 7, 6, "recv"},       {0, "pp0", 6, 6, "send"},
      {1, "dp1", 3, 3, "all_reduce"}, {3, "dp1", 4, 3, "all_reduce"}};
  Wavefront w = ComputeWavefront(p);
  ASSERT_EQ(w.groups.size(), 2u);
  EXPECT_EQ(w.culprits, (std::vector<int>{0}));
}

TEST(WavefrontTest, RanksStillInsideAnEarlierCollectiveAreBehindNotCulprits) {
  // A hierarchical all-reduce over two nodes {0,1} and {2,3}: rank 3 was
  // stopped inside #148, ranks 0 and 1 finished it and entered #149, rank 2
  // waits inside #148 for rank 3. Nobody is missing-and-idle: the culprit is
  // found by its process state (the coordinator's job), not here.
  std::vector<GroupProgress> p = {
      {0, "dp0", 149, 148, "all_reduce"}, {1, "dp0", 149, 148, "all_reduce"},
      {2, "dp0", 148, 147, "all_reduce"}, {3, "dp0", 148, 147, "all_reduce"}};
  Wavefront w = ComputeWavefront(p);
  ASSERT_EQ(w.groups.size(), 1u);
  EXPECT_EQ(w.groups[0].seq, 149);
  EXPECT_EQ(w.groups[0].waiting, (std::vector<int>{0, 1}));
  EXPECT_TRUE(w.groups[0].missing.empty());
  EXPECT_EQ(w.groups[0].behind, (std::vector<int>{2, 3}));
  EXPECT_TRUE(w.culprits.empty());
  EXPECT_NE(DescribeWavefront(w).find("still inside an earlier one 2,3"),
            std::string::npos);
}

TEST(WavefrontTest, AMemberThatFinishedIsNeitherWaitingNorMissing) {
  // Rank 1 stopped inside #425 after its data reached rank 0, which
  // finished #425 and waits outside any collective.
  std::vector<GroupProgress> p = {{0, "dp0", 425, 425, "all_reduce"},
                                  {1, "dp0", 425, 424, "all_reduce"}};
  Wavefront w = ComputeWavefront(p);
  ASSERT_EQ(w.groups.size(), 1u);
  EXPECT_EQ(w.groups[0].waiting, (std::vector<int>{1}));
  EXPECT_EQ(w.groups[0].done, (std::vector<int>{0}));
  EXPECT_TRUE(w.culprits.empty());
  EXPECT_EQ(DescribeWavefront(w).find("data stopped moving"), std::string::npos);
  EXPECT_NE(DescribeWavefront(w).find("waiting 1; finished by 0"),
            std::string::npos);
}

TEST(WavefrontTest, EveryoneInsideMeansDataStoppedMoving) {
  std::vector<GroupProgress> p = {{0, "tp0", 5, 4, "all_gather"},
                                  {1, "tp0", 5, 4, "all_gather"}};
  Wavefront w = ComputeWavefront(p);
  ASSERT_EQ(w.groups.size(), 1u);
  EXPECT_TRUE(w.groups[0].missing.empty());
  EXPECT_TRUE(w.culprits.empty());
  EXPECT_NE(DescribeWavefront(w).find("data stopped moving"),
            std::string::npos);
}

TEST(WavefrontTest, IdleGroupsAreNotStuck) {
  std::vector<GroupProgress> p = {{0, "dp0", 9, 9, "all_reduce"},
                                  {1, "dp0", 9, 9, "all_reduce"}};
  Wavefront w = ComputeWavefront(p);
  EXPECT_TRUE(w.groups.empty());
  EXPECT_EQ(DescribeWavefront(w), "no group is inside a collective");
}

}  // namespace
}  // namespace strata::fault
