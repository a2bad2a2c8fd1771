#include "fault/plan_check.h"

#include <algorithm>

#include "absl/strings/str_format.h"
#include "fault/window.h"

namespace strata::fault {

PlanCheck CheckPlan(const std::vector<StageTime>& stages, double threshold) {
  PlanCheck out;
  if (stages.empty()) return out;
  std::vector<double> ratios;
  for (const StageTime& s : stages) ratios.push_back(s.measured_s / s.predicted_s);
  out.calibration = Median(ratios);
  for (size_t i = 0; i < stages.size(); ++i) {
    // Against the other stages only: with two stages the median of all
    // would be their mean and halve a slow stage's excess.
    std::vector<double> others;
    for (size_t j = 0; j < ratios.size(); ++j) {
      if (j != i) others.push_back(ratios[j]);
    }
    const double reference = others.empty() ? ratios[i] : Median(others);
    double r = ratios[i] / reference;
    out.calibrated_ratio.push_back(r);
    if (r < threshold) continue;
    FaultEvent e;
    e.kind = EventKind::kPlanMismatch;
    e.stage = stages[i].stage;
    e.slowdown = r;
    e.evidence = absl::StrFormat(
        "stage %d measured %.4fs, predicted %.4fs; %.2fx its prediction "
        "where the other stages run at %.2fx",
        stages[i].stage, stages[i].measured_s, stages[i].predicted_s,
        ratios[i], reference);
    out.events.push_back(std::move(e));
  }
  if (!out.events.empty()) return out;
  auto [lo, hi] = std::minmax_element(
      stages.begin(), stages.end(), [](const StageTime& a, const StageTime& b) {
        return a.measured_s < b.measured_s;
      });
  if (hi->measured_s / lo->measured_s >= threshold) {
    FaultEvent e;
    e.kind = EventKind::kUnbalancedPlan;
    e.stage = hi->stage;
    e.slowdown = hi->measured_s / lo->measured_s;
    e.evidence = absl::StrFormat(
        "stage %d takes %.4fs, stage %d %.4fs, as predicted (%.4fs vs "
        "%.4fs): the split is uneven, the hardware is not",
        hi->stage, hi->measured_s, lo->stage, lo->measured_s,
        hi->predicted_s, lo->predicted_s);
    out.events.push_back(std::move(e));
  }
  return out;
}

}  // namespace strata::fault
