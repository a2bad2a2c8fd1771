// Slow-link detection: a node x node matrix of transfer bandwidth built from
// the per-peer transfer times of ring and point-to-point steps.
//
// Each directed inter-node pair keeps the median bandwidth of its recent
// transfers. The reference is the pair's expected bandwidth when the caller
// knows it (the measured topology), else the best pair median in the
// matrix: one slow NIC slows every pair it takes part in, so a median over
// pairs would follow it, while the best pair shows what the fabric does.
// A pair is slow when reference / median >= threshold with at least
// `min_samples` transfers. Transfers within a node are ignored. Per-peer
// latency matrices for slow links follow Alibaba's C4D. Not thread-safe.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "fault/event.h"
#include "fault/window.h"

namespace strata::fault {

struct SlowLinkOptions {
  int window = 32;          // transfers per pair median
  int min_samples = 8;      // transfers before a pair is judged
  double threshold = 2.0;   // reference / pair median that counts as slow
  int64_t min_bytes = 64 << 10;  // smaller transfers measure latency only
};

struct Transfer {
  std::string src_node;
  std::string dst_node;
  int64_t bytes = 0;
  double seconds = 0;
};

struct LinkStat {
  double bytes_per_s = 0;  // median of the window
  int samples = 0;
};

class SlowLinkDetector {
 public:
  explicit SlowLinkDetector(SlowLinkOptions options) : options_(options) {}

  // Expected bandwidth of src -> dst in bytes/s (e.g. from the topology
  // probe); pairs without one use the best pair as reference.
  void SetExpected(const std::string& src, const std::string& dst,
                   double bytes_per_s);

  void Add(const Transfer& t);

  // The matrix as measured: (src, dst) -> median bandwidth and samples.
  std::map<std::pair<std::string, std::string>, LinkStat> Matrix() const;

  // One event per slow pair (`node` = src, `peer_node` = dst), slowest
  // first; `step` is left -1 for the caller to fill.
  std::vector<FaultEvent> Check() const;

 private:
  SlowLinkOptions options_;
  std::map<std::pair<std::string, std::string>, Window> pairs_;
  std::map<std::pair<std::string, std::string>, int> counts_;
  std::map<std::pair<std::string, std::string>, double> expected_;
};

}  // namespace strata::fault
