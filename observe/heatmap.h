// Rank x step heat maps as SVG: one row per rank, one column per step, the
// cell's colour the value (compute or wait seconds), ranks flagged by the
// straggler detector marked. MegaScale found its slow hosts from such maps;
// a slow rank is a bright row, a slow step a bright column.
//
// Colours: the viridis palette (perceptually uniform, readable in grey and
// by colour-blind readers), scaled between the 2nd and 98th percentile of
// the values so one outlier step does not wash out the rest; missing cells
// (NaN) are light grey. Pure; the output is a complete SVG document.
#pragma once

#include <cstdint>
#include <set>
#include <string>
#include <vector>

namespace strata::observe {

struct Heatmap {
  std::string title;            // e.g. "job-3: compute seconds per step"
  std::string unit = "s";
  std::vector<int> ranks;       // rows, top to bottom
  std::vector<int64_t> steps;   // columns, left to right
  std::vector<std::vector<double>> values;  // [row][column]; NaN = missing
  std::set<int> flagged;        // ranks drawn with a red marker
};

// REQUIRES: values.size() == ranks.size(), each row steps.size() long.
std::string RenderHeatmapSvg(const Heatmap& map);

// The same map as a PNG picture without text (the SVG has the labels and
// tooltips): one block of cells per rank and step, flagged ranks with a red
// marker left of their row and a red outline, a viridis legend strip below
// from the 2nd to the 98th percentile. For viewers without a browser.
std::string RenderHeatmapPng(const Heatmap& map);

// The viridis colour at t in [0, 1] as "#rrggbb" (clamped).
std::string Viridis(double t);

}  // namespace strata::observe
