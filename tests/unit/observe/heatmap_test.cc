#include "observe/heatmap.h"

#include <cmath>
#include <regex>

#include "gtest/gtest.h"

namespace strata::observe {
namespace {

int Count(const std::string& s, const std::string& what) {
  int n = 0;
  for (size_t p = s.find(what); p != std::string::npos; p = s.find(what, p + 1))
    ++n;
  return n;
}

TEST(HeatmapTest, OneCellPerRankAndStepAndTheStragglerMarked) {
  Heatmap m;
  m.title = "job-1: compute <seconds> & more";
  m.ranks = {0, 1, 2, 3};
  for (int s = 0; s < 50; ++s) m.steps.push_back(100 + s);
  m.values.assign(4, std::vector<double>(50, 0.1));
  for (int s = 20; s < 50; ++s) m.values[2][s] = 0.13;
  m.values[0][7] = NAN;
  m.flagged = {2};
  const std::string svg = RenderHeatmapSvg(m);
  EXPECT_EQ(svg.rfind("<svg xmlns=\"http://www.w3.org/2000/svg\"", 0), 0u);
  EXPECT_NE(svg.find("</svg>\n"), std::string::npos);
  EXPECT_EQ(Count(svg, "<title>rank "), 200);
  EXPECT_EQ(Count(svg, "no data"), 1);
  EXPECT_NE(svg.find("rank 2 step 120: 0.13 s"), std::string::npos);
  EXPECT_NE(svg.find("stroke=\"#d00\""), std::string::npos);  // straggler
  EXPECT_NE(svg.find("\u25B6 rank 2"), std::string::npos);
  EXPECT_EQ(svg.find("\u25B6 rank 1"), std::string::npos);
  EXPECT_NE(svg.find("compute &lt;seconds&gt; &amp; more"), std::string::npos);
  // The slow cells get the top of the scale, the others the bottom.
  EXPECT_NE(svg.find("fill=\"" + Viridis(1) + "\"><title>rank 2 step 130"),
            std::string::npos);
  EXPECT_NE(svg.find("fill=\"" + Viridis(0) + "\"><title>rank 1 step 130"),
            std::string::npos);
}

TEST(HeatmapTest, ViridisEndsAndClamps) {
  EXPECT_EQ(Viridis(0), "#440154");
  EXPECT_EQ(Viridis(1), "#fde725");
  EXPECT_EQ(Viridis(-3), "#440154");
  EXPECT_EQ(Viridis(7), "#fde725");
  EXPECT_EQ(Viridis(NAN), "#440154");
}

TEST(HeatmapTest, EmptyMapIsStillADocument) {
  const std::string svg = RenderHeatmapSvg({});
  EXPECT_NE(svg.find("</svg>"), std::string::npos);
}

}  // namespace
}  // namespace strata::observe
