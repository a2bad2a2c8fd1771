#include "checkpoint/internal/box.h"

#include <numeric>

#include "gtest/gtest.h"

namespace strata::checkpoint::internal {
namespace {

TEST(BoxTest, IntersectAndEmpty) {
  Box a{{0, 4}, {8, 8}}, b{{6, 0}, {4, 6}};
  auto r = Intersect(a, b);
  ASSERT_TRUE(r);
  EXPECT_EQ(r->offset, (std::vector<int64_t>{6, 4}));
  EXPECT_EQ(r->shape, (std::vector<int64_t>{2, 2}));
  EXPECT_FALSE(Intersect(a, Box{{8, 0}, {2, 2}}));
}

TEST(BoxTest, CopyRegionBetweenDifferentlyShapedBoxes) {
  // Global 6x5 matrix with value 10*row + col.
  auto value = [](int64_t r, int64_t c) {
    return static_cast<float>(10 * r + c);
  };
  Box src{{1, 0}, {4, 5}};  // rows 1-4, all columns
  std::vector<float> s(20);
  for (int64_t r = 0; r < 4; ++r)
    for (int64_t c = 0; c < 5; ++c) s[r * 5 + c] = value(r + 1, c);
  Box dst{{0, 2}, {6, 3}};  // all rows, columns 2-4
  std::vector<float> d(18, -1);
  auto region = Intersect(src, dst);
  ASSERT_TRUE(region);
  CopyRegion(*region, src, s.data(), dst, d.data(), sizeof(float));
  for (int64_t r = 0; r < 6; ++r) {
    for (int64_t c = 0; c < 3; ++c) {
      const float want = (r >= 1 && r <= 4) ? value(r, c + 2) : -1;
      EXPECT_EQ(d[r * 3 + c], want) << r << "," << c;
    }
  }
}

TEST(BoxTest, ByteRunsMergeFullWidthRows) {
  Box box{{0, 0}, {4, 8}};
  // Two full rows: one run of 2*8 elements.
  auto runs = RegionByteRuns(Box{{1, 0}, {2, 8}}, box, 4);
  ASSERT_EQ(runs.size(), 1u);
  const std::pair<uint64_t, uint64_t> two_rows{32, 96};
  EXPECT_EQ(runs[0], two_rows);
  // A column slice: one run per row.
  runs = RegionByteRuns(Box{{0, 2}, {4, 3}}, box, 4);
  ASSERT_EQ(runs.size(), 4u);
  const std::pair<uint64_t, uint64_t> second_row{40, 52};
  EXPECT_EQ(runs[1], second_row);
}

}  // namespace
}  // namespace strata::checkpoint::internal
