#include "observe/trace.h"

#include <algorithm>
#include <climits>
#include <tuple>

#include "absl/strings/str_cat.h"
#include "observe/json_writer.h"

namespace strata::observe {
namespace {

constexpr int kStepsThread = 1;
constexpr int kCollectivesThread = 2;

class Writer {
 public:
  explicit Writer(int64_t base_ns) : base_ns_(base_ns) {}

  void Event(const std::string& body) {
    absl::StrAppend(&out_, first_ ? "\n" : ",\n", "{", body, "}");
    first_ = false;
  }
  std::string Ts(int64_t ns) const {
    return JsonNumber((ns - base_ns_) / 1000.0);
  }
  std::string Finish() { return absl::StrCat("{\"traceEvents\":[", out_,
                                             "\n],\"displayTimeUnit\":\"ms\"}\n"); }

 private:
  int64_t base_ns_;
  std::string out_;
  bool first_ = true;
};

}  // namespace

std::string WriteTrace(const TraceInput& in) {
  std::map<int, std::string> node_of;
  for (const TraceRank& r : in.ranks) node_of[r.rank] = r.node;
  auto offset = [&](int rank) -> int64_t {
    auto n = node_of.find(rank);
    if (n == node_of.end()) return 0;
    auto o = in.node_offset_ns.find(n->second);
    return o == in.node_offset_ns.end() ? 0 : o->second;
  };

  int64_t lo = INT64_MAX, hi = INT64_MIN;
  auto see = [&](int64_t ns) {
    lo = std::min(lo, ns);
    hi = std::max(hi, ns);
  };
  for (const SectionSpan& s : in.sections) {
    see(s.start_ns + offset(s.rank));
    see(s.start_ns + s.dur_ns + offset(s.rank));
  }
  for (const CollectiveSpan& c : in.collectives) {
    for (int64_t t : {c.entered_ns, c.started_ns, c.finished_ns}) {
      if (t > 0) see(t + offset(c.rank));
    }
  }
  for (const InstantEvent& e : in.instants) see(e.ts_ns);
  if (lo == INT64_MAX) lo = hi = 0;

  Writer w(lo);
  for (const TraceRank& r : in.ranks) {
    w.Event(absl::StrCat(
        "\"ph\":\"M\",\"name\":\"process_name\",\"pid\":", r.rank,
        ",\"args\":{\"name\":", JsonString(absl::StrCat("rank ", r.rank, " (", r.node, ")")),
        "}"));
    w.Event(absl::StrCat("\"ph\":\"M\",\"name\":\"process_sort_index\",\"pid\":",
                         r.rank, ",\"args\":{\"sort_index\":", r.rank, "}"));
    w.Event(absl::StrCat("\"ph\":\"M\",\"name\":\"thread_name\",\"pid\":",
                         r.rank, ",\"tid\":", kStepsThread,
                         ",\"args\":{\"name\":\"step sections\"}"));
    w.Event(absl::StrCat("\"ph\":\"M\",\"name\":\"thread_name\",\"pid\":",
                         r.rank, ",\"tid\":", kCollectivesThread,
                         ",\"args\":{\"name\":\"collectives\"}"));
  }
  for (const SectionSpan& s : in.sections) {
    const int64_t start = s.start_ns + offset(s.rank);
    w.Event(absl::StrCat(
        "\"ph\":\"X\",\"cat\":\"step\",\"name\":", JsonString(s.section),
        ",\"pid\":", s.rank, ",\"tid\":", kStepsThread, ",\"ts\":", w.Ts(start),
        ",\"dur\":", JsonNumber(s.dur_ns / 1000.0),
        ",\"args\":{\"step\":", s.step, "}"));
  }

  // Collectives, and one flow per (group, seq) through its ranks in order
  // of entry: the arrows show who arrived last.
  std::map<std::pair<std::string, uint64_t>, std::vector<const CollectiveSpan*>>
      by_op;
  for (const CollectiveSpan& c : in.collectives) {
    if (c.entered_ns <= 0) continue;
    const int64_t start = c.entered_ns + offset(c.rank);
    const bool done = c.finished_ns > 0;
    const int64_t end = done ? c.finished_ns + offset(c.rank) : hi;
    const int64_t waited =
        c.started_ns > 0 ? c.started_ns - c.entered_ns : end - start;
    w.Event(absl::StrCat(
        "\"ph\":\"X\",\"cat\":\"collective\",\"name\":",
        JsonString(done ? c.op : c.op + " (unfinished)"), ",\"pid\":", c.rank,
        ",\"tid\":", kCollectivesThread, ",\"ts\":", w.Ts(start),
        ",\"dur\":", JsonNumber((end - start) / 1000.0),
        ",\"args\":{\"group\":", JsonString(c.group), ",\"seq\":", c.seq,
        ",\"bytes\":", c.bytes, ",\"waited_us\":", JsonNumber(waited / 1000.0),
        "}"));
    by_op[{c.group, c.seq}].push_back(&c);
  }
  uint64_t flow_id = 0;
  for (auto& [key, spans] : by_op) {
    if (spans.size() < 2) continue;
    std::sort(spans.begin(), spans.end(),
              [&](const CollectiveSpan* a, const CollectiveSpan* b) {
                return std::make_tuple(a->entered_ns + offset(a->rank),
                                       a->rank) <
                       std::make_tuple(b->entered_ns + offset(b->rank),
                                       b->rank);
              });
    ++flow_id;
    for (size_t i = 0; i < spans.size(); ++i) {
      const char* ph = i == 0 ? "s" : (i + 1 == spans.size() ? "f" : "t");
      w.Event(absl::StrCat(
          "\"ph\":\"", ph, "\",\"cat\":\"collective\",\"name\":",
          JsonString(absl::StrCat(key.first, " #", key.second)), ",\"id\":",
          flow_id, ",\"pid\":", spans[i]->rank, ",\"tid\":", kCollectivesThread,
          ",\"ts\":", w.Ts(spans[i]->entered_ns + offset(spans[i]->rank)),
          i + 1 == spans.size() ? ",\"bp\":\"e\"" : ""));
    }
  }
  for (const InstantEvent& e : in.instants) {
    w.Event(absl::StrCat(
        "\"ph\":\"i\",\"cat\":\"event\",\"name\":", JsonString(e.name),
        ",\"s\":\"", e.rank < 0 ? "g" : "p", "\",\"pid\":", std::max(e.rank, 0),
        ",\"tid\":", kStepsThread, ",\"ts\":", w.Ts(e.ts_ns),
        ",\"args\":{\"detail\":", JsonString(e.detail), "}"));
  }
  return w.Finish();
}

ClockOffset EstimateClockOffset(const std::vector<ClockSample>& samples) {
  ClockOffset best{0, -1};
  int64_t best_delay = INT64_MAX;
  for (const ClockSample& s : samples) {
    const int64_t rtt = s.local_recv_ns - s.local_send_ns;
    const bool both = s.remote_recv_ns > 0 && s.remote_ns >= s.remote_recv_ns;
    const int64_t delay = both ? rtt - (s.remote_ns - s.remote_recv_ns) : rtt;
    if (rtt < 0 || delay < 0 || delay >= best_delay) continue;
    best_delay = delay;
    // The true offset puts the remote readings inside the round trip minus
    // the remote's own time; the middle is wrong by at most half of it.
    best.offset_ns =
        both ? ((s.remote_recv_ns - s.local_send_ns) +
                (s.remote_ns - s.local_recv_ns)) / 2
             : s.remote_ns - (s.local_send_ns + rtt / 2);
    best.error_bound_ns = delay / 2;
  }
  return best;
}

}  // namespace strata::observe
