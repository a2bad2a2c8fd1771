#include "fault/hang_detector.h"

#include <algorithm>
#include <cmath>

#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"

namespace strata::fault {

HangDetector::HangDetector(HangOptions options, const Clock& clock,
                           std::vector<int> ranks)
    : options_(options), clock_(clock), steps_(options.window) {
  int64_t now = clock_.SteadyNowMs();
  for (int r : ranks) ranks_[r] = Progress{now};
}

void HangDetector::OnStep(int rank, int64_t step, double step_seconds) {
  auto it = ranks_.find(rank);
  if (it == ranks_.end() || step <= it->second.step) return;  // stale
  it->second = Progress{clock_.SteadyNowMs(), step};
  if (std::isfinite(step_seconds) && step_seconds >= 0) {
    steps_.Add(step_seconds);
  }
}

int64_t HangDetector::DeadlineMs() const {
  if (steps_.size() == 0) return options_.first_step_ms;
  auto learned = static_cast<int64_t>(options_.k * steps_.Median() * 1000);
  return std::max(options_.floor_ms, learned);
}

std::optional<Stall> HangDetector::Check() const {
  int64_t now = clock_.SteadyNowMs();
  Stall stall;
  stall.deadline_ms = DeadlineMs();
  for (const auto& [rank, p] : ranks_) {
    // Before a rank's first step its own deadline is the start-up one.
    int64_t deadline = p.step < 0 ? options_.first_step_ms : stall.deadline_ms;
    int64_t age = now - p.last_ms;
    if (age <= deadline) continue;
    stall.ranks.push_back(rank);
    stall.stalled_ms = std::max(stall.stalled_ms, age);
    stall.last_step =
        stall.last_step < 0 ? p.step : std::min(stall.last_step, p.step);
  }
  if (stall.ranks.empty()) return std::nullopt;
  return stall;
}

FaultEvent HangDetector::ToEvent(const Stall& stall) {
  FaultEvent e;
  e.kind = EventKind::kHang;
  e.step = stall.last_step;
  e.evidence = absl::StrFormat(
      "no step progress for %.1fs (deadline %.1fs) on ranks %s; last step %d",
      stall.stalled_ms / 1000.0, stall.deadline_ms / 1000.0,
      absl::StrJoin(stall.ranks, ","), stall.last_step);
  return e;
}

}  // namespace strata::fault
