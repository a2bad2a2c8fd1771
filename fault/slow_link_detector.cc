#include "fault/slow_link_detector.h"

#include <algorithm>

#include "absl/strings/str_format.h"

namespace strata::fault {

void SlowLinkDetector::SetExpected(const std::string& src,
                                   const std::string& dst,
                                   double bytes_per_s) {
  expected_[{src, dst}] = bytes_per_s;
}

void SlowLinkDetector::Add(const Transfer& t) {
  if (t.src_node == t.dst_node || t.bytes < options_.min_bytes ||
      !(t.seconds > 0)) {
    return;
  }
  auto key = std::make_pair(t.src_node, t.dst_node);
  pairs_.try_emplace(key, options_.window)
      .first->second.Add(static_cast<double>(t.bytes) / t.seconds);
  ++counts_[key];
}

std::map<std::pair<std::string, std::string>, LinkStat>
SlowLinkDetector::Matrix() const {
  std::map<std::pair<std::string, std::string>, LinkStat> m;
  for (const auto& [key, window] : pairs_) {
    m[key] = LinkStat{window.Median(), counts_.at(key)};
  }
  return m;
}

std::vector<FaultEvent> SlowLinkDetector::Check() const {
  auto matrix = Matrix();
  double best = 0;
  for (const auto& [key, stat] : matrix) {
    if (stat.samples >= options_.min_samples) {
      best = std::max(best, stat.bytes_per_s);
    }
  }
  std::vector<FaultEvent> events;
  for (const auto& [key, stat] : matrix) {
    if (stat.samples < options_.min_samples || stat.bytes_per_s <= 0) continue;
    auto exp = expected_.find(key);
    bool has_expected = exp != expected_.end();
    double reference = has_expected ? exp->second : best;
    double slowdown = reference / stat.bytes_per_s;
    if (slowdown < options_.threshold) continue;
    FaultEvent e;
    e.kind = EventKind::kSlowLink;
    e.node = key.first;
    e.peer_node = key.second;
    e.slowdown = slowdown;
    e.evidence = absl::StrFormat(
        "%s -> %s: median %.1f MB/s over %d transfers vs %s %.1f MB/s",
        key.first, key.second, stat.bytes_per_s / 1e6, stat.samples,
        has_expected ? "expected" : "best pair", reference / 1e6);
    events.push_back(std::move(e));
  }
  std::sort(events.begin(), events.end(),
            [](const FaultEvent& a, const FaultEvent& b) {
              return a.slowdown > b.slowdown;
            });
  return events;
}

}  // namespace strata::fault
