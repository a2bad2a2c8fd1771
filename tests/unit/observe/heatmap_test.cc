#include "observe/heatmap.h"

#include <zlib.h>

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

uint32_t Be32(const std::string& s, size_t at) {
  uint32_t v = 0;
  for (int i = 0; i < 4; ++i) v = v << 8 | static_cast<uint8_t>(s[at + i]);
  return v;
}

TEST(HeatmapTest, PngHasTheCellsAndTheMarker) {
  Heatmap m;
  m.ranks = {0, 1};
  m.steps = {1, 2, 3, 4};
  m.values = {{0.1, 0.1, 0.1, 0.1}, {0.1, 0.2, 0.2, 0.2}};
  m.flagged = {1};
  const std::string png = RenderHeatmapPng(m);
  ASSERT_EQ(png.substr(0, 8), std::string("\x89PNG\r\n\x1a\n", 8));
  ASSERT_EQ(png.substr(12, 4), "IHDR");
  const uint32_t w = Be32(png, 16), h = Be32(png, 20);
  EXPECT_EQ(png[24], 8);  // bit depth
  EXPECT_EQ(png[25], 2);  // RGB
  // Every chunk's CRC is right; collect the image data.
  std::string idat;
  for (size_t at = 8; at < png.size();) {
    const uint32_t len = Be32(png, at);
    const std::string type = png.substr(at + 4, 4);
    const auto* p = reinterpret_cast<const Bytef*>(png.data() + at + 4);
    EXPECT_EQ(crc32(0, p, len + 4), Be32(png, at + 8 + len)) << type;
    if (type == "IDAT") idat += png.substr(at + 8, len);
    at += 12 + len;
  }
  std::string raw(h * (1 + 3 * w), '\0');
  uLongf raw_len = raw.size();
  ASSERT_EQ(uncompress(reinterpret_cast<Bytef*>(raw.data()), &raw_len,
                       reinterpret_cast<const Bytef*>(idat.data()), idat.size()),
            Z_OK);
  ASSERT_EQ(raw_len, raw.size());
  auto pixel = [&](int x, int y) {
    const size_t at = y * (1 + 3 * w) + 1 + 3 * x;
    char buf[8];
    std::snprintf(buf, sizeof(buf), "#%02x%02x%02x",
                  static_cast<uint8_t>(raw[at]), static_cast<uint8_t>(raw[at + 1]),
                  static_cast<uint8_t>(raw[at + 2]));
    return std::string(buf);
  };
  // Cells are 12 px wide (1200 / 4 capped) and 16 px high (600 / 2 capped),
  // after an 8 px margin left and 4 px on top.
  const int row1 = 4 + 16 + 8;
  EXPECT_EQ(pixel(8 + 12 * 0 + 6, 4 + 8), Viridis(0));  // rank 0: fast
  EXPECT_EQ(pixel(8 + 12 * 2 + 6, row1), Viridis(1));   // rank 1: slow
  EXPECT_EQ(pixel(2, row1), "#dc2626");                 // the marker
  EXPECT_EQ(pixel(2, 4 + 8), "#ffffff");                // none for rank 0
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
