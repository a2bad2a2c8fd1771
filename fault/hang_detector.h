// Hang detection: no step progress within a deadline learned from the job.
//
// Each rank's completed steps are fed in; the deadline is
// max(floor, k x the median step time of the recent window), and before the
// first step completes it is `first_step` (start-up includes loading and
// compiling). A rank is stalled when its last progress is older than the
// deadline; inside synchronous collectives every rank stalls behind a stuck
// one, so the stalled set says *that* the job hangs — the wavefront of the
// flight recorders (wavefront.h) says *who* it waits for. The defaults
// (k = 3, floor 10 s) make a hang known within max(3 x median step, 10 s);
// a floor keeps short steps from tripping on scheduler noise. Reads time only
// from the injected Clock (steady readings). Not thread-safe.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <vector>

#include "common/clock.h"
#include "fault/event.h"
#include "fault/window.h"

namespace strata::fault {

struct HangOptions {
  double k = 3;                   // deadline = k x median step time ...
  int64_t floor_ms = 10'000;      // ... but never below this
  int64_t first_step_ms = 300'000;  // deadline before any step completed
  int window = 50;                // steps in the median
};

struct Stall {
  int64_t deadline_ms = 0;        // the deadline that was exceeded
  int64_t stalled_ms = 0;         // oldest progress age among stalled ranks
  int64_t last_step = -1;         // lowest last step among stalled ranks
  std::vector<int> ranks;         // ranks past the deadline, ascending
};

class HangDetector {
 public:
  // Starts watching `ranks` from now (the first-step deadline runs from
  // here). `clock` must outlive the detector.
  HangDetector(HangOptions options, const Clock& clock, std::vector<int> ranks);

  // Rank `rank` completed `step` taking `step_seconds`.
  void OnStep(int rank, int64_t step, double step_seconds);

  // The current deadline in milliseconds.
  int64_t DeadlineMs() const;

  // The ranks without progress past the deadline, or nullopt when none.
  std::optional<Stall> Check() const;

  // An event for `stall` (evidence: deadline, age, steps).
  static FaultEvent ToEvent(const Stall& stall);

 private:
  struct Progress {
    int64_t last_ms;
    int64_t step = -1;
  };
  HangOptions options_;
  const Clock& clock_;
  std::map<int, Progress> ranks_;
  Window steps_;
};

}  // namespace strata::fault
