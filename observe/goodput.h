// Goodput accounting of a job (docs/observe.md "Goodput"): its wall time
// since the submit split into productive steps and time lost by cause, as
// Google's ML goodput (Cloud TPU "ML Goodput Measurement") and the ETTR of
// Meta's Llama 3 and ByteDance's ByteRobust reports frame it: how much of
// the time held was useful, and where did the rest go?
//
// Fed by the coordinator with what it sees: each step of one rank (rank 0:
// synchronous training moves in lock-step, so its step ends are the job's),
// the end of every failed attempt, hang and straggler findings, the job's
// end. Every wall-clock millisecond lands in exactly one bucket:
//   - startup: submit to the first step of the first attempt (queueing,
//     placement, process start, initialisation, the first step's own time
//     beyond a step);
//   - restart: an attempt's failure (the partial step lost with it) to the
//     first step of the next attempt, re-placement and resume included;
//   - hang: the last step of an attempt that hung to its end (the stall
//     until detection, the diagnosis and the stop);
//   - recompute: steps run again after a resume (steps at or below the
//     highest step any earlier attempt finished);
//   - checkpoint: a step's `checkpoint` section (the training loop blocked
//     on a save);
//   - straggler: after a straggler (or plan_mismatch) finding in the
//     attempt, each step's time beyond the attempt's baseline (the median
//     of its last kBaselineSteps steps before the finding);
//   - productive: the rest of each step's time.
// Time since the last event is counted where it is heading (in a running
// attempt: productive), so the buckets always add up to the wall time.
// Pure; the coordinator keeps one per job, in memory and, every few
// seconds, in its state store (Save, Restore).
#pragma once

#include <cstdint>
#include <deque>
#include <string>

#include "common/status.h"
#include "proto/control.pb.h"

namespace strata::observe {

struct Goodput {
  double wall_s = 0;
  double productive_s = 0;
  double startup_s = 0, restart_s = 0, hang_s = 0, recompute_s = 0,
         checkpoint_s = 0, straggler_s = 0;
  double ratio() const { return wall_s > 0 ? productive_s / wall_s : 0; }
};

class GoodputLedger {
 public:
  static constexpr int kBaselineSteps = 20;

  explicit GoodputLedger(int64_t submit_ms);

  // Rank 0 finished `step` of attempt `attempt` at `end_ms`, spending
  // `checkpoint_s` of it in checkpointing. Earlier or repeated reports of
  // an attempt are ignored.
  void OnStep(int attempt, int64_t step, int64_t end_ms, double step_s,
              double checkpoint_s);
  // The current attempt was found hung (its time since the last step is
  // hang time from now on).
  void OnHang();
  // A straggler slows the current attempt from now on.
  void OnStraggler();
  // The current attempt failed at `ms`; later reports of it (or of any
  // earlier attempt) are ignored.
  void OnAttemptEnd(int64_t ms);
  // The job ended at `ms`: nothing accrues after.
  void OnJobEnd(int64_t ms);

  Goodput At(int64_t now_ms) const;

  // The ledger's whole state, and a ledger continuing from one
  // (the coordinator keeps it across its restarts). The interval from the
  // saved mark to the next event is attributed by the saved phase, as it
  // would have been without the restart. InvalidArgument when `state` is
  // not one Save wrote (an unknown phase, a mark before the submit).
  control::GoodputState Save() const;
  static StatusOr<GoodputLedger> Restore(const control::GoodputState& state);

 private:
  enum class Phase { kStarting, kRunning, kHung, kEnded };
  void Close(int64_t ms);  // attributes [mark_ms_, ms) by phase_
  double Baseline() const;

  Goodput g_;
  int64_t submit_ms_, mark_ms_;
  Phase phase_ = Phase::kStarting;
  bool first_attempt_ = true, straggling_ = false, job_ended_ = false;
  int attempt_ = -1;          // the attempt steps count for
  int ended_attempt_ = -1;    // the newest attempt that ended
  int64_t last_step_ = -1;       // of the current attempt
  int64_t high_water_ = 0;       // highest step finished by an ended attempt
  int64_t attempt_high_ = 0;     // highest step of the current attempt
  std::deque<double> recent_s_;  // the attempt's step times, pre-finding
};

// The wire form (JobInfo.goodput) and back.
control::Goodput ToProto(const Goodput& g);
Goodput FromProto(const control::Goodput& p);

// "87.1% of 2m00s; lost: startup 5.1s, restart 3.2s, ..." (only
// the causes with time lost).
std::string DescribeGoodput(const Goodput& g);

}  // namespace strata::observe
