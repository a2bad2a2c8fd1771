#include "observe/heatmap.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdio>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "observe/png.h"

namespace strata::observe {
namespace {

// viridis at t = 0, 1/8, ..., 1 (matplotlib's colormap, sampled).
constexpr int kStops[9][3] = {{68, 1, 84},    {71, 44, 122},  {59, 81, 139},
                              {44, 113, 142}, {33, 144, 141}, {39, 173, 129},
                              {92, 200, 99},  {170, 220, 50}, {253, 231, 37}};

std::string XmlEscape(const std::string& s) {
  std::string out;
  for (char c : s) {
    switch (c) {
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '&': out += "&amp;"; break;
      case '"': out += "&quot;"; break;
      default:
        if (static_cast<unsigned char>(c) >= 0x20 || c == '\t') out += c;
    }
  }
  return out;
}

double Percentile(std::vector<double> v, double p) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const double pos = p * (v.size() - 1);
  const size_t i = static_cast<size_t>(pos);
  const double frac = pos - i;
  return i + 1 < v.size() ? v[i] * (1 - frac) + v[i + 1] * frac : v[i];
}

std::string Num(double v) { return absl::StrFormat("%.4g", v); }


std::array<uint8_t, 3> ViridisRgb(double t) {
  if (!(t >= 0)) t = 0;  // also NaN
  t = std::min(t, 1.0);
  const double pos = t * 8;
  const int i = std::min(static_cast<int>(pos), 7);
  const double f = pos - i;
  std::array<uint8_t, 3> rgb;
  for (int k = 0; k < 3; ++k) {
    rgb[k] = static_cast<uint8_t>(
        std::lround(kStops[i][k] * (1 - f) + kStops[i + 1][k] * f));
  }
  return rgb;
}

// The colour scale: the 2nd and 98th percentile of the finite values, and
// the span between them (1 when they are equal).
struct ColourScale {
  double lo, hi, span;
};
ColourScale Scale(const Heatmap& map) {
  std::vector<double> finite;
  for (const auto& row : map.values) {
    for (double v : row) {
      if (std::isfinite(v)) finite.push_back(v);
    }
  }
  const double lo = Percentile(finite, 0.02), hi = Percentile(finite, 0.98);
  return {lo, hi, hi > lo ? hi - lo : 1};
}

}  // namespace

std::string Viridis(double t) {
  const auto rgb = ViridisRgb(t);
  return absl::StrFormat("#%02x%02x%02x", rgb[0], rgb[1], rgb[2]);
}

std::string RenderHeatmapPng(const Heatmap& map) {
  const int rows = std::max<int>(1, map.ranks.size());
  const int cols = std::max<int>(1, map.steps.size());
  const int cw = std::clamp(1200 / cols, 1, 12), ch = std::clamp(600 / rows, 2, 16);
  const int left = 8, top = 4, legend = 12, gap = 6;
  const int width = left + cols * cw + 4, height = top + rows * ch + gap + legend + 4;
  std::vector<uint8_t> px(static_cast<size_t>(width) * height * 3, 255);
  auto fill = [&](int x0, int y0, int w, int h, std::array<uint8_t, 3> c) {
    for (int y = std::max(0, y0); y < std::min(height, y0 + h); ++y) {
      for (int x = std::max(0, x0); x < std::min(width, x0 + w); ++x) {
        std::copy(c.begin(), c.end(), px.begin() + 3 * (y * width + x));
      }
    }
  };
  const auto [lo, hi, span] = Scale(map);
  const std::array<uint8_t, 3> grey{221, 221, 221}, red{220, 38, 38};
  for (size_t r = 0; r < map.values.size(); ++r) {
    const int y = top + static_cast<int>(r) * ch;
    for (size_t c = 0; c < map.values[r].size(); ++c) {
      const double v = map.values[r][c];
      fill(left + static_cast<int>(c) * cw, y, cw, ch,
           std::isfinite(v) ? ViridisRgb((v - lo) / span) : grey);
    }
    if (r < map.ranks.size() && map.flagged.contains(map.ranks[r])) {
      fill(0, y, left - 2, ch, red);
      fill(left, y, cols * cw, 1, red);
      fill(left, y + ch - 1, cols * cw, 1, red);
    }
  }
  const int ly = top + rows * ch + gap;
  for (int x = 0; x < cols * cw; ++x) {
    fill(left + x, ly, 1, legend, ViridisRgb(x / double(std::max(1, cols * cw - 1))));
  }
  return EncodePng(width, height, px);
}

std::string RenderHeatmapSvg(const Heatmap& map) {
  const int rows = static_cast<int>(map.ranks.size());
  const int cols = static_cast<int>(map.steps.size());
  const auto [lo, hi, span] = Scale(map);

  // Layout: cells fill ~900 x ~rows*14 px, at least 1 x 6 px each.
  const double cw = cols > 0 ? std::max(1.0, 900.0 / cols) : 1;
  const double ch = rows > 0 ? std::clamp(420.0 / rows, 6.0, 24.0) : 6;
  const double left = 90, top = 40, grid_w = cw * cols, grid_h = ch * rows;
  const double width = left + grid_w + 110, height = top + grid_h + 50;

  std::string svg = absl::StrFormat(
      "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%.0f\" "
      "height=\"%.0f\" viewBox=\"0 0 %.0f %.0f\" font-family=\"sans-serif\" "
      "font-size=\"11\">\n<rect width=\"100%%\" height=\"100%%\" "
      "fill=\"white\"/>\n<text x=\"%.0f\" y=\"22\" font-size=\"14\">%s</text>\n",
      width, height, width, height, left, XmlEscape(map.title));
  for (int r = 0; r < rows; ++r) {
    const double y = top + r * ch;
    const bool flagged = map.flagged.contains(map.ranks[r]);
    absl::StrAppend(
        &svg,
        absl::StrFormat("<text x=\"%.0f\" y=\"%.1f\" text-anchor=\"end\" "
                        "dominant-baseline=\"middle\"%s>%srank %d</text>\n",
                        left - 6, y + ch / 2,
                        flagged ? " fill=\"#d00\" font-weight=\"bold\"" : "",
                        flagged ? "\u25B6 " : "", map.ranks[r]));
    const std::vector<double>& row = map.values[r];
    for (int c = 0; c < cols; ++c) {
      const double v = c < static_cast<int>(row.size()) ? row[c] : NAN;
      const std::string fill =
          std::isfinite(v) ? Viridis((v - lo) / span) : "#dddddd";
      absl::StrAppend(
          &svg, absl::StrFormat(
                    "<rect x=\"%.2f\" y=\"%.2f\" width=\"%.2f\" height=\"%.2f\" "
                    "fill=\"%s\"><title>rank %d step %d: %s</title></rect>\n",
                    left + c * cw, y, cw + 0.05, ch + 0.05, fill, map.ranks[r],
                    map.steps[c],
                    std::isfinite(v) ? Num(v) + " " + XmlEscape(map.unit)
                                     : "no data"));
    }
    if (flagged) {
      absl::StrAppend(&svg, absl::StrFormat(
                                "<rect x=\"%.2f\" y=\"%.2f\" width=\"%.2f\" "
                                "height=\"%.2f\" fill=\"none\" stroke=\"#d00\" "
                                "stroke-width=\"2\"/>\n",
                                left, y, grid_w, ch));
    }
  }
  // Step axis: about ten ticks.
  const int every = std::max(1, cols / 10);
  for (int c = 0; c < cols; c += every) {
    absl::StrAppend(
        &svg, absl::StrFormat("<text x=\"%.1f\" y=\"%.0f\" "
                              "text-anchor=\"middle\">%d</text>\n",
                              left + (c + 0.5) * cw, top + grid_h + 16,
                              map.steps[c]));
  }
  absl::StrAppend(
      &svg, absl::StrFormat("<text x=\"%.0f\" y=\"%.0f\" "
                            "text-anchor=\"middle\">step</text>\n",
                            left + grid_w / 2, top + grid_h + 34));
  // Legend: a vertical colour bar from lo (bottom) to hi (top).
  const double lx = left + grid_w + 20, lh = std::max(grid_h, 60.0);
  for (int i = 0; i < 32; ++i) {
    absl::StrAppend(&svg, absl::StrFormat(
                              "<rect x=\"%.0f\" y=\"%.2f\" width=\"14\" "
                              "height=\"%.2f\" fill=\"%s\"/>\n",
                              lx, top + lh * (31 - i) / 32.0, lh / 32 + 0.05,
                              Viridis(i / 31.0)));
  }
  absl::StrAppend(
      &svg,
      absl::StrFormat("<text x=\"%.0f\" y=\"%.0f\">%s %s</text>\n"
                      "<text x=\"%.0f\" y=\"%.0f\">%s %s</text>\n</svg>\n",
                      lx + 18, top + 8, Num(hi), XmlEscape(map.unit), lx + 18,
                      top + lh, Num(lo), XmlEscape(map.unit)));
  return svg;
}

}  // namespace strata::observe
