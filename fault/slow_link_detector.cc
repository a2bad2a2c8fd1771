#include "fault/slow_link_detector.h"

#include <algorithm>
#include <set>

#include "absl/strings/str_format.h"

namespace strata::fault {

void SlowLinkDetector::SetExpected(const std::string& src,
                                   const std::string& dst,
                                   double bytes_per_s) {
  expected_[{src, dst}] = bytes_per_s;
}

void SlowLinkDetector::Add(const Transfer& t) {
  if (t.src_node == t.dst_node || t.bytes < options_.min_bytes ||
      !(t.seconds >= 0)) {
    return;
  }
  Pair& p = pairs_[{t.src_node, t.dst_node}];
  p.samples.emplace_back(t.bytes, t.seconds);
  p.bytes += t.bytes;
  p.seconds += t.seconds;
  p.long_bytes += t.bytes;
  p.long_seconds += t.seconds;
  ++p.count;
  const int window = static_cast<int>(p.samples.size());
  if (window > options_.window) {  // the sample leaving the short window
    const auto& [bytes, seconds] = p.samples[window - 1 - options_.window];
    p.bytes -= bytes;
    p.seconds -= seconds;
  }
  if (window > std::max(options_.window, options_.long_window)) {
    p.long_bytes -= p.samples.front().first;
    p.long_seconds -= p.samples.front().second;
    p.samples.pop_front();
  }
  if (p.count == options_.window && p.seconds >= options_.min_busy_s) {
    p.baseline = p.bytes / p.seconds;
  }
}

std::map<std::pair<std::string, std::string>, LinkStat>
SlowLinkDetector::Matrix() const {
  std::map<std::pair<std::string, std::string>, LinkStat> m;
  for (const auto& [key, p] : pairs_) {
    // Sums drift by rounding as samples come and go; a window of 0 s busy
    // has no rate yet.
    const double rate = p.seconds > 1e-9 ? p.bytes / p.seconds : 0;
    m[key] = LinkStat{rate, p.baseline, p.count};
  }
  return m;
}

std::vector<FaultEvent> SlowLinkDetector::Check() const {
  auto judged = [&](const std::pair<std::string, std::string>& key) {
    const Pair& p = pairs_.at(key);
    return p.count >= options_.min_samples &&
           p.seconds >= options_.min_busy_s;
  };
  auto matrix = Matrix();
  double best = 0;
  for (const auto& [key, stat] : matrix) {
    if (judged(key)) best = std::max(best, stat.bytes_per_s);
  }
  std::vector<FaultEvent> events;
  for (const auto& [key, stat] : matrix) {
    if (!judged(key) || stat.bytes_per_s <= 0) continue;
    auto exp = expected_.find(key);
    double reference = best;
    const char* what = "best pair";
    if (exp != expected_.end() && exp->second > reference) {
      reference = exp->second;
      what = "expected";
    }
    if (stat.baseline_bytes_per_s > reference) {
      reference = stat.baseline_bytes_per_s;
      what = "its own first window";
    }
    const double slowdown = reference / stat.bytes_per_s;
    if (slowdown < options_.threshold) continue;
    const Pair& p = pairs_.at(key);
    const double long_rate =
        p.long_seconds > 1e-9 ? p.long_bytes / p.long_seconds : 0;
    if (long_rate > 0 && reference / long_rate < options_.threshold) {
      continue;  // not (yet) over the long window: a passing burst
    }
    FaultEvent e;
    e.kind = EventKind::kSlowLink;
    e.node = key.first;
    e.peer_node = key.second;
    e.slowdown = slowdown;
    e.evidence = absl::StrFormat(
        "%s -> %s: %.1f MB/s (%.1f MB in %.2f s busy sending, last %d "
        "steps; %.1f MB/s over the last %d) vs %s %.1f MB/s",
        key.first, key.second, stat.bytes_per_s / 1e6, p.bytes / 1e6,
        p.seconds, std::min<int>(p.samples.size(), options_.window),
        long_rate / 1e6, static_cast<int>(p.samples.size()), what,
        reference / 1e6);
    events.push_back(std::move(e));
  }
  std::sort(events.begin(), events.end(),
            [](const FaultEvent& a, const FaultEvent& b) {
              return a.slowdown > b.slowdown;
            });
  return events;
}

std::optional<std::string> SlowLinkDetector::CommonNode(
    const std::vector<FaultEvent>& slow) {
  if (slow.empty()) return std::nullopt;
  std::set<std::string> common = {slow[0].node, slow[0].peer_node};
  for (const FaultEvent& e : slow) {
    std::set<std::string> keep;
    for (const std::string& n : common) {
      if (n == e.node || n == e.peer_node) keep.insert(n);
    }
    common = std::move(keep);
  }
  if (common.size() != 1) return std::nullopt;
  return *common.begin();
}

}  // namespace strata::fault
