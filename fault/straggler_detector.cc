#include "fault/straggler_detector.h"

#include <algorithm>

#include "absl/strings/str_format.h"

namespace strata::fault {

StragglerDetector::StragglerDetector(StragglerOptions options,
                                     std::vector<RankInfo> ranks)
    : options_(std::move(options)) {
  for (RankInfo& info : ranks) {
    classes_[info.work_class].push_back(info.rank);
    int rank = info.rank;
    ranks_.emplace(rank, RankState(std::move(info), options_));
  }
}

double StragglerDetector::Compute(const StepSample& s) const {
  double total = 0;
  for (const auto& [name, seconds] : s.sections) {
    if (!options_.wait_sections.contains(name)) total += seconds;
  }
  return total;
}

std::optional<double> StragglerDetector::Reference(const RankState& r) const {
  const std::vector<int>& peers = classes_.at(r.info.work_class);
  if (peers.size() < 2) return r.baseline;
  std::vector<double> medians;
  for (int p : peers) {
    const RankState& s = ranks_.at(p);
    if (p == r.info.rank) continue;
    // Peers' medians count once they hold a short window's worth.
    if (s.compute.size() < static_cast<size_t>(options_.window)) {
      return std::nullopt;
    }
    medians.push_back(s.compute.Median());
  }
  return Median(medians);
}

double StragglerDetector::Corroborated(const RankState& r, double ref,
                                       double own) const {
  // Against its own baseline, only the rank's own numbers count anyway.
  if (!r.has_late || classes_.at(r.info.work_class).size() < 2) return ref;
  // A rank that computes `own` while its peers compute `ref` arrives at the
  // step's collectives about own - ref after the fastest of them: the
  // reference may sit only that far below the rank's own compute, so a
  // peer claiming a shorter compute (a longer wait) than it had cannot make
  // the rank look slower than its arrivals show (docs/security.md).
  return std::max(ref, own - r.late.Median());
}

bool StragglerDetector::ArrivesLate(const RankState& r) const {
  if (!r.has_late) return true;  // no arrival data: compute time decides
  std::vector<double> others;
  for (int p : classes_.at(r.info.work_class)) {
    const RankState& s = ranks_.at(p);
    if (p != r.info.rank && s.has_late) others.push_back(s.late.Median());
  }
  if (others.empty()) return true;
  return r.late.Median() > Median(others);
}

std::string StragglerDetector::SlowestSection(const RankState& r) const {
  std::string best;
  double best_ratio = 0;
  for (const auto& [name, window] : r.sections) {
    std::vector<double> peers;
    for (int p : classes_.at(r.info.work_class)) {
      if (p == r.info.rank) continue;
      const auto& other = ranks_.at(p).sections;
      auto it = other.find(name);
      if (it != other.end()) peers.push_back(it->second.Median());
    }
    double ref = peers.empty() ? 0 : Median(peers);
    double ratio = ref > 0 ? window.Median() / ref : 0;
    if (ratio > best_ratio) best_ratio = ratio, best = name;
  }
  return best;
}

std::vector<FaultEvent> StragglerDetector::Add(const StepSample& sample) {
  auto it = ranks_.find(sample.rank);
  if (it == ranks_.end()) return {};
  RankState& r = it->second;
  if (++r.seen <= options_.warmup) return {};
  double compute = Compute(sample);
  r.recent.Add(compute);
  r.compute.Add(compute);
  for (const auto& [name, seconds] : sample.sections) {
    if (options_.wait_sections.contains(name)) continue;
    r.sections.try_emplace(name, options_.window).first->second.Add(seconds);
  }
  if (sample.late_s) {
    r.late.Add(*sample.late_s);
    r.has_late = true;
  }
  if (!r.baseline && r.compute.full()) r.baseline = r.compute.Median();

  std::optional<double> ref = Reference(r);
  if (!ref || *ref <= 0 || !r.recent.full()) return {};
  double fast = r.recent.Median() / Corroborated(r, *ref, r.recent.Median());
  double slow = r.compute.full()
                    ? r.compute.Median() /
                          Corroborated(r, *ref, r.compute.Median())
                    : 1;
  bool above = fast >= options_.fast_threshold || slow >= options_.threshold;
  if (!above || !ArrivesLate(r)) {
    r.above = 0;
    r.above_s = 0;
    // An episode ends only after `confirm` steps below half the threshold's
    // excess (hysteresis), so a slowdown near the threshold is one event.
    double clear = 1 + (options_.threshold - 1) / 2;
    if (r.flagged && (std::max(fast, slow) >= clear ||
                      ++r.below < options_.confirm)) {
      return {};
    }
    r.below = 0;
    r.flagged = false;
    return {};
  }
  r.below = 0;
  for (const auto& [name, seconds] : sample.sections) r.above_s += seconds;
  if (++r.above < options_.confirm || r.above_s < options_.confirm_s ||
      r.flagged) {
    return {};
  }
  double slowdown = std::max(fast, slow);
  r.flagged = true;
  FaultEvent e;
  e.kind = EventKind::kStraggler;
  e.step = sample.step;
  e.rank = r.info.rank;
  e.node = r.info.node;
  e.slowdown = slowdown;
  e.section = SlowestSection(r);
  e.evidence = absl::StrFormat(
      "compute median %.4fs over the last %d steps (%.4fs over %d) vs "
      "reference %.4fs (%s); late median %.4fs; slow for %d steps (%.1fs)",
      r.recent.Median(), static_cast<int>(r.recent.size()), r.compute.Median(),
      static_cast<int>(r.compute.size()), *ref,
      classes_.at(r.info.work_class).size() < 2 ? "own baseline"
                                                : "peers' median",
      r.has_late ? r.late.Median() : 0.0, r.above, r.above_s);
  return {e};
}

StragglerScore StragglerDetector::Score(int rank) const {
  StragglerScore s;
  auto it = ranks_.find(rank);
  if (it == ranks_.end()) return s;
  const RankState& r = it->second;
  if (r.compute.size() == 0) return s;
  double median = r.compute.Median();
  s.compute_s = median;
  if (std::optional<double> ref = Reference(r); ref && *ref > 0) {
    s.relative = median / *ref;
  }
  if (r.baseline && *r.baseline > 0) s.individual = median / *r.baseline;
  s.late_s = r.has_late ? r.late.Median() : 0;
  s.flagged = r.flagged;
  return s;
}

}  // namespace strata::fault
