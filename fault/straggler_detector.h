// Straggler detection from per-rank step sections.
//
// A rank is a straggler when its compute time — the step's sections minus
// the time spent waiting in collectives — stays above its reference by a
// factor for `confirm` consecutive steps. The reference is:
// - the other ranks doing the same work (same `work_class`, e.g. the same
//   pipeline stage): the median of their long-window medians, so the rank
//   under test never raises its own reference;
// - for a rank alone in its class, its own baseline: the median of its first
//   full long window after warm-up (a change point against itself).
// Two windows of the rank's own compute time are compared with it: a short
// one against a high threshold finds large slowdowns fast, a long one
// against a low threshold finds small ones without reacting to noise.
// Waiting is excluded because inside a synchronous collective the victims
// wait for the culprit, so whole-step times even out across ranks while
// compute times do not. When the flight recorder supplies how late a rank
// arrived at its collectives, a rank is confirmed only if it also arrives
// later than its peers (culprit), never when it waits (victim), and its
// excess over the peers' reference counts only as far as its lateness
// shows it: peers that under-report their compute cannot make it look
// slower than its own arrivals do (docs/security.md).
//
// Medians over windows (not means) make single slow steps (GC, page cache,
// a checkpoint) harmless; scoring as median ratios against peers follows
// NVIDIA's resiliency extension (threshold 0.75 in its inverse form), and
// acting on a persistent shift of >= 10% follows Falcon/Greyhound's
// fail-slow criterion. Defaults: docs/fault.md. Not thread-safe.
#pragma once

#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "fault/event.h"
#include "fault/window.h"

namespace strata::fault {

struct StragglerOptions {
  int window = 20;              // steps in the short median
  double fast_threshold = 1.20; // short-window slowdown that counts
  int long_window = 60;         // steps in the long median
  double threshold = 1.10;      // long-window slowdown that counts
  int warmup = 5;               // first steps of each rank ignored
  int confirm = 8;              // consecutive steps above threshold to flag
  // ... which must also span this much of the rank's step time: on short
  // steps a scheduling burst on a shared core fills `confirm` steps in a
  // fraction of a second (16 findings in 2,000 clean 15 ms steps on 4
  // ranks of this 2-core machine with the step count alone; strata-bench
  // fault). A slowdown that lasts less is not worth acting on.
  double confirm_s = 3.0;
  // Sections that are time spent waiting for peers, not computing.
  std::set<std::string> wait_sections = {"wait"};
};

struct RankInfo {
  int rank = 0;
  std::string node;
  int work_class = 0;  // ranks with the same class do the same work
};

struct StepSample {
  int rank = 0;
  int64_t step = 0;
  std::map<std::string, double> sections;  // seconds per section
  // Mean lateness of this rank's arrival at the step's collectives, in
  // seconds after the earliest member of each group; unset if unknown.
  std::optional<double> late_s;
};

struct StragglerScore {
  double compute_s = 0;   // long-window median compute seconds
  double relative = 1;    // long median / peers' reference (1 if none)
  double individual = 1;  // long median / own baseline (1 before one)
  double late_s = 0;      // window median lateness (0 if unknown)
  bool flagged = false;
};

class StragglerDetector {
 public:
  // REQUIRES: every rank in `ranks` distinct; 1 <= window <= long_window.
  StragglerDetector(StragglerOptions options, std::vector<RankInfo> ranks);

  // Feeds one rank's step; returns an event the first step a rank is
  // confirmed slow (one event per episode: a rank must stay below
  // 1 + (threshold - 1) / 2 for `confirm` steps before it can be reported
  // again). Samples of unknown ranks are
  // ignored.
  std::vector<FaultEvent> Add(const StepSample& sample);

  StragglerScore Score(int rank) const;

 private:
  struct RankState {
    RankState(RankInfo i, const StragglerOptions& o)
        : info(std::move(i)),
          recent(o.window),
          compute(o.long_window),
          late(o.window) {}
    RankInfo info;
    int seen = 0;
    Window recent;   // short window of compute seconds
    Window compute;  // long window of compute seconds
    Window late;
    bool has_late = false;
    std::map<std::string, Window> sections;
    std::optional<double> baseline;
    int above = 0;  // consecutive steps at or above the threshold
    double above_s = 0;  // their step time (every section, waits included)
    int below = 0;  // consecutive steps below the clear level while flagged
    bool flagged = false;
  };

  double Compute(const StepSample& s) const;
  // Reference for `r`: the median of its peers' long-window medians, or its
  // baseline when alone; nullopt until there is one.
  std::optional<double> Reference(const RankState& r) const;
  // The peers' reference `ref` as far as the rank's own lateness backs it
  // when compared with its compute `own`: max(ref, own - late median);
  // `ref` itself without arrival data or for a rank alone in its class.
  double Corroborated(const RankState& r, double ref, double own) const;
  bool ArrivesLate(const RankState& r) const;
  std::string SlowestSection(const RankState& r) const;

  StragglerOptions options_;
  std::map<int, RankState> ranks_;
  std::map<int, std::vector<int>> classes_;  // work_class -> ranks
};

}  // namespace strata::fault
