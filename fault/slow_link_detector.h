// Slow-link detection: a node x node matrix of send bandwidth built from
// per-direction transfer samples (docs/fault.md "Slow links").
//
// A sample is what one rank sent to a peer on another node during one step:
// bytes the peer acknowledged and the time the connection was busy sending
// them (the kernel's TCP_INFO busy time: time with data in flight, so time
// spent waiting for the collective's other steps is not in it). A ring moves
// at its slowest link's pace, but each link's busy time is its own: a fast
// link sends its share quickly and then idles, which is not counted.
//
// Each directed inter-node pair keeps its last `window` samples; its rate is
// their bytes over their busy seconds (a ratio of sums, not a median of
// per-step rates: the kernel counts busy time in scheduler ticks, so one
// step's busy time can read 0 or one tick). The reference of a pair is the
// largest of: its expected bandwidth when the caller knows it (the measured
// topology), the best pair rate in the matrix (one slow NIC slows every pair
// it takes part in, so a median over pairs would follow it), and the pair's
// own baseline, its rate over its first full window (what lets a link that
// degrades be found when there is no other pair to compare with, e.g. two
// nodes). A pair is slow when reference / rate >= threshold, judged once it
// has `min_samples` samples spanning `min_busy_s` of busy time, and when its
// rate over the longer window (`long_window` samples) is below the
// reference by the threshold as well: a slow link stays slow, while a burst
// of CPU contention on a host (the receiver's acknowledgements late, so the
// sender's busy time grows) passes within a window and would otherwise read
// as a slow link; the same two-window rule as the straggler detector's long
// and short windows. With a 4x slower link the long window agrees once a
// third of its samples are slow (4f + 1 - f >= 2). Transfers
// within a node are ignored. Per-peer matrices for slow links follow
// Alibaba's C4D (NSDI'25 / SIGCOMM'24 collective-communication diagnosis).
// Not thread-safe.
#pragma once

#include <cstdint>
#include <deque>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "fault/event.h"

namespace strata::fault {

struct SlowLinkOptions {
  int window = 32;          // samples per pair rate
  int long_window = 128;    // samples the slowdown must also hold over
  int min_samples = 8;      // samples before a pair is judged
  double threshold = 2.0;   // reference / pair rate that counts as slow
  int64_t min_bytes = 64 << 10;  // smaller samples measure latency only
  double min_busy_s = 0.1;  // busy time a judged window must span
};

struct Transfer {
  std::string src_node;
  std::string dst_node;
  int64_t bytes = 0;
  double seconds = 0;  // busy sending; may be 0 (clock ticks), never < 0
};

struct LinkStat {
  double bytes_per_s = 0;  // bytes / busy seconds over the window
  double baseline_bytes_per_s = 0;  // over the first full window; 0: none yet
  int samples = 0;                  // all samples ever added
};

class SlowLinkDetector {
 public:
  explicit SlowLinkDetector(SlowLinkOptions options) : options_(options) {}

  // Expected bandwidth of src -> dst in bytes/s (e.g. from the topology
  // probe).
  void SetExpected(const std::string& src, const std::string& dst,
                   double bytes_per_s);

  void Add(const Transfer& t);

  // The matrix as measured: (src, dst) -> rate, baseline and samples.
  std::map<std::pair<std::string, std::string>, LinkStat> Matrix() const;

  // One event per slow pair (`node` = src, `peer_node` = dst), slowest
  // first; `step` is left -1 for the caller to fill.
  std::vector<FaultEvent> Check() const;

  // The node every one of `slow` pairs has in common, when exactly one node
  // is (one slow NIC or host link shows as every pair it is in); nullopt
  // when the pairs share none, or two (a single pair both ways).
  static std::optional<std::string> CommonNode(
      const std::vector<FaultEvent>& slow);

 private:
  struct Pair {
    // The last `long_window` samples (bytes, seconds); the newest `window`
    // of them are the pair's window.
    std::deque<std::pair<int64_t, double>> samples;
    int64_t bytes = 0;                 // sums over the window
    double seconds = 0;
    int64_t long_bytes = 0;            // sums over all of `samples`
    double long_seconds = 0;
    int count = 0;
    double baseline = 0;
  };
  SlowLinkOptions options_;
  std::map<std::pair<std::string, std::string>, Pair> pairs_;
  std::map<std::pair<std::string, std::string>, double> expected_;
};

}  // namespace strata::fault
