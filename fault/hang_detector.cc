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
  const bool first = it->second.step < 0;
  it->second = Progress{clock_.SteadyNowMs(), step};
  if (!std::isfinite(step_seconds) || step_seconds < 0) return;
  if (first) {
    first_s_ = std::max(first_s_, step_seconds);
  } else {
    steps_.Add(step_seconds);
  }
}

void HangDetector::OnPhaseBegin(int rank, const std::string& name,
                                int64_t deadline_ms) {
  auto it = ranks_.find(rank);
  if (it == ranks_.end()) return;
  it->second.last_ms = clock_.SteadyNowMs();
  it->second.phase = name.empty() ? "phase" : name;
  it->second.phase_deadline_ms =
      deadline_ms > 0 ? deadline_ms : options_.phase_ms;
}

void HangDetector::OnPhaseEnd(int rank) {
  auto it = ranks_.find(rank);
  if (it == ranks_.end() || it->second.phase.empty()) return;
  it->second.last_ms = clock_.SteadyNowMs();
  it->second.phase.clear();
  it->second.phase_deadline_ms = 0;
}

int64_t HangDetector::DeadlineMs() const {
  if (steps_.size() == 0 && first_s_ <= 0) return options_.first_step_ms;
  // Only first steps so far: they stand for both terms (an overestimate,
  // so never a false hang).
  const double median_s = steps_.size() > 0 ? steps_.Median() : first_s_;
  const double max_s = steps_.size() > 0 ? steps_.Max() : first_s_;
  auto median = static_cast<int64_t>(options_.k * median_s * 1000);
  auto tail = static_cast<int64_t>(options_.tail_k * max_s * 1000);
  return std::max({options_.floor_ms, median, tail});
}

int64_t HangDetector::DeadlineOf(const Progress& p,
                                 int64_t step_deadline) const {
  if (!p.phase.empty()) return p.phase_deadline_ms;
  // Before a rank's first step its own deadline is the start-up one.
  return p.step < 0 ? options_.first_step_ms : step_deadline;
}

std::optional<Stall> HangDetector::Check() const {
  int64_t now = clock_.SteadyNowMs();
  Stall stall;
  const int64_t step_deadline = DeadlineMs();
  for (const auto& [rank, p] : ranks_) {
    if (last_step_ > 0 && p.step >= last_step_) continue;  // done
    const int64_t deadline = DeadlineOf(p, step_deadline);
    int64_t age = now - p.last_ms;
    if (age <= deadline) continue;
    if (stall.ranks.empty()) {
      stall.deadline_ms = deadline;
      stall.phase = p.phase;
    }
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
      "no %s for %.1fs (deadline %.1fs) on ranks %s; last step %d",
      stall.phase.empty() ? std::string("step progress")
                          : "end of phase '" + stall.phase + "'",
      stall.stalled_ms / 1000.0, stall.deadline_ms / 1000.0,
      absl::StrJoin(stall.ranks, ","), stall.last_step);
  return e;
}

}  // namespace strata::fault
