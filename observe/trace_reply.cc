#include "observe/trace_reply.h"

#include <algorithm>
#include <climits>
#include <map>
#include <vector>

#include "absl/strings/str_cat.h"

namespace strata::observe {
namespace {

// Position of a section in a step; unknown sections come last, by name.
int Order(const std::string& name) {
  static const char* const kOrder[] = {"data",        "forward",  "backward",
                                       "grad_reduce", "optimizer", "checkpoint"};
  for (int i = 0; i < 6; ++i) {
    if (name == kOrder[i]) return i;
  }
  return 6;
}

bool Drawn(const std::string& name) {
  return name != "wait" && name != "comm" && !name.ends_with("_total");
}

}  // namespace

TraceInput TraceInputFromReply(const control::TraceReply& reply, bool align) {
  TraceInput in;
  for (const auto& r : reply.ranks()) {
    in.ranks.push_back({r.rank(), r.node()});
    if (align && r.has_clock()) {
      in.node_offset_ns[r.node()] = r.clock().offset_us() * 1000;
    }
  }
  for (const auto& s : reply.steps()) {
    const int64_t end_ns = s.end_unix_us() > 0 ? s.end_unix_us() * 1000
                                               : s.unix_ms() * 1000000;
    const int64_t dur_ns = static_cast<int64_t>(s.step_seconds() * 1e9);
    const int64_t start_ns = end_ns - dur_ns;
    in.sections.push_back(
        {s.rank(), s.step(), absl::StrCat("step ", s.step()), start_ns, dur_ns});
    std::vector<std::pair<std::string, double>> parts;
    for (const auto& [name, seconds] : s.section_seconds()) {
      if (Drawn(name) && seconds > 0) parts.emplace_back(name, seconds);
    }
    std::sort(parts.begin(), parts.end(), [](const auto& a, const auto& b) {
      return Order(a.first) != Order(b.first) ? Order(a.first) < Order(b.first)
                                              : a.first < b.first;
    });
    int64_t at = start_ns;
    for (const auto& [name, seconds] : parts) {
      const int64_t d = std::min(static_cast<int64_t>(seconds * 1e9),
                                 end_ns - at);  // stays inside its step
      if (d <= 0) break;
      in.sections.push_back({s.rank(), s.step(), name, at, d});
      at += d;
    }
  }
  for (const auto& t : reply.collectives()) {
    for (const auto& op : t.ops()) {
      in.collectives.push_back({t.rank(), op.group(), op.seq(), op.op(),
                                op.bytes(), op.entered_us() * 1000,
                                op.started_us() * 1000,
                                op.finished_us() * 1000});
    }
  }
  // The attempt's events inside the steps drawn (stamped by the
  // coordinator: already its clock).
  std::map<std::string, int64_t> offset = in.node_offset_ns;
  std::map<int, int64_t> rank_offset;
  for (const auto& r : in.ranks) rank_offset[r.rank] = offset[r.node];
  int64_t lo = INT64_MAX, hi = INT64_MIN;
  for (const SectionSpan& s : in.sections) {
    lo = std::min(lo, s.start_ns + rank_offset[s.rank]);
    hi = std::max(hi, s.start_ns + s.dur_ns + rank_offset[s.rank]);
  }
  for (const auto& e : reply.events()) {
    const int64_t ts = e.unix_ms() * 1000000;
    if (ts < lo || ts > hi) continue;
    in.instants.push_back({e.kind(), e.rank(), ts, e.message()});
  }
  return in;
}

}  // namespace strata::observe
