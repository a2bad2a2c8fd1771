// Hang detection: no progress within a deadline learned from the job.
//
// Each rank's completed steps are fed in. The step deadline adapts to the
// measured step-time distribution of the recent window:
//   max(floor, k x median, tail_k x slowest step of the window)
// The median term is the steady-state rule; the tail term keeps steps that
// are regularly slower (a checkpoint every K steps, a data-loader refill)
// from tripping it: a hang must outlast twice the slowest step the window
// has seen. NVIDIA's resiliency extension learns its timeouts the same way
// (5 x the largest observed heartbeat interval, fault_tolerance
// timeouts_calc.py); strata uses the window's max with a smaller factor
// because the median term already covers the steady state. The floor
// (3 s by default) keeps short steps from tripping on scheduler noise.
//
// Before a rank's first step its deadline is `first_step` (start-up includes
// loading and compiling). That first step's own time includes the same
// one-off work (allocation, the first connections, a resume or an in-place
// re-formation), up to several steady steps long on a loaded host: it is
// kept out of the window (the tail term would otherwise double it for the
// next 200 steps) and used only while the window is still empty. Work outside the step loop (evaluation, checkpoint
// save or load, data loading) is a *phase*: a rank that announces one gets
// the phase's own deadline until it ends it or completes a step, so a long
// evaluation is not a hang; the step clock restarts when the phase ends.
// A rank that completed the run's last step is done and never stalls.
//
// Inside synchronous collectives every rank stalls behind a stuck one, so
// the stalled set says *that* the job hangs; the wavefront of the flight
// recorders (wavefront.h) says *who* it waits for. Reads time only from the
// injected Clock (steady readings). Not thread-safe.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "common/clock.h"
#include "fault/event.h"
#include "fault/window.h"

namespace strata::fault {

struct HangOptions {
  double k = 3;                   // deadline >= k x median step time
  double tail_k = 2;              // deadline >= tail_k x slowest recent step
  int64_t floor_ms = 3'000;       // ... and never below this
  int64_t first_step_ms = 300'000;  // deadline before any step completed
  // A phase announced without its own deadline: Megatron-LM's default
  // `--ft-rank-section-timeouts` gives its `checkpointing` section 600 s.
  int64_t phase_ms = 600'000;
  int window = 200;               // steps in the median and the tail
};

struct Stall {
  int64_t deadline_ms = 0;        // the deadline that was exceeded
  int64_t stalled_ms = 0;         // oldest progress age among stalled ranks
  int64_t last_step = -1;         // lowest last step among stalled ranks
  std::vector<int> ranks;         // ranks past the deadline, ascending
  std::string phase;              // the phase they were in, if any
};

class HangDetector {
 public:
  // Starts watching `ranks` from now (the first-step deadline runs from
  // here). `clock` must outlive the detector.
  HangDetector(HangOptions options, const Clock& clock, std::vector<int> ranks);

  // Rank `rank` completed `step` taking `step_seconds`; ends its phase.
  void OnStep(int rank, int64_t step, double step_seconds);
  // Rank `rank` began phase `name` now, with deadline `deadline_ms`
  // (0: HangOptions::phase_ms).
  void OnPhaseBegin(int rank, const std::string& name, int64_t deadline_ms);
  // Rank `rank` ended its phase now: its step clock restarts.
  void OnPhaseEnd(int rank);
  // The run's last step (0: unknown): ranks that completed it are done.
  void SetLastStep(int64_t last_step) { last_step_ = last_step; }

  // The current step deadline in milliseconds.
  int64_t DeadlineMs() const;

  // The ranks without progress past their deadline, or nullopt when none.
  std::optional<Stall> Check() const;

  // An event for `stall` (evidence: deadline, age, steps, phase).
  static FaultEvent ToEvent(const Stall& stall);

 private:
  struct Progress {
    int64_t last_ms;
    int64_t step = -1;
    std::string phase;            // empty outside a phase
    int64_t phase_deadline_ms = 0;
  };
  int64_t DeadlineOf(const Progress& p, int64_t step_deadline) const;
  HangOptions options_;
  const Clock& clock_;
  std::map<int, Progress> ranks_;
  Window steps_;
  double first_s_ = 0;  // the slowest first step of a rank (not in steps_)
  int64_t last_step_ = 0;
};

}  // namespace strata::fault
