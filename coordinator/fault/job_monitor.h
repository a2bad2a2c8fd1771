// The fault monitor of one running attempt (docs/fault.md): every rank's
// step reports feed the fault/ detectors, and the coordinator asks it for
// findings. Event-loop thread only; time from the injected Clock.
//
// What each report becomes:
// - compute = step time - wait - comm (the time in collectives the runtime
//   measured, runtime/step_timer.h), split over the step's own sections
//   (forward, backward, ...) in their proportions, so a straggler event
//   names the section that stands out;
// - lateness = how much more time the most waiting rank spent in the
//   step's collectives than this one: the rank everyone waits for spends
//   least (fed once every rank's report of the step arrived; a step some
//   rank never reports is fed without it after kPendingSteps newer steps).
//   Once any report of the attempt carries the worker's reading of a
//   flight recorder (StepReport.recorded_ops), only those readings count:
//   (the largest recorded share - this rank's) x its own step time, and a
//   rank without one is not late. Before that (collectives strata does not
//   record, e.g. torch's own) the waits the ranks report count. A rank's
//   own numbers therefore make only itself look slow in a recorded attempt
//   (docs/security.md "Straggler evidence");
// - progress for the hang detector;
// - its link samples (StepReport.links: bytes sent to a peer and the time
//   the connections were busy sending) feed the slow-link detector as
//   transfers between the two ranks' nodes; the matrix is judged at most
//   once a second, and a slow pair is reported once until it has been
//   fine for kLinkClearChecks judgements;
// - with the plan's predicted compute per pipeline stage (Plan.
//   stage_compute_s, from the planner), plan vs measured (fault/
//   plan_check.h) every kPlanCheckMs once each stage has kPlanWindow steps:
//   a stage's measured compute is the median over its ranks of each rank's
//   median of its last kPlanWindow steps; each finding (kind, stage) is
//   reported once per attempt, with the stage's node when all its ranks
//   share one.
#pragma once

#include <cstdint>
#include <deque>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "common/clock.h"
#include "fault/hang_detector.h"
#include "fault/plan_check.h"
#include "fault/policy.h"
#include "fault/slow_link_detector.h"
#include "fault/straggler_detector.h"
#include "proto/control.pb.h"

namespace strata::coordinator {

class JobMonitor {
 public:
  struct RankMeta {
    int rank = 0;
    std::string node;
    int stage = 0;  // pipeline stage: ranks of one stage do the same work
  };
  static constexpr int kPendingSteps = 32;
  static constexpr int kLinkClearChecks = 30;
  static constexpr int kPlanWindow = 20;
  static constexpr int64_t kPlanCheckMs = 10000;

  // `clock` must outlive the monitor. `predicted_stage_s`: the plan's
  // predicted compute seconds per step of each pipeline stage (empty: no
  // prediction, no plan check).
  JobMonitor(const Clock& clock, const fault::ResolvedPolicy& policy,
             std::vector<RankMeta> ranks,
             std::vector<double> predicted_stage_s = {});

  // Feeds one report; returns the straggler and slow-link findings it
  // confirmed. A slow-link finding whose pairs all share one node says so in
  // its evidence.
  std::vector<fault::FaultEvent> OnStep(const control::StepReport& report);
  // A rank entered or left a phase outside the step loop (StepReport.phase,
  // .phase_end): its hang deadline is the phase's while it lasts.
  void OnPhase(const control::StepReport& report);

  // A stall past the learned deadline, once per stall (again only after
  // some progress).
  std::optional<fault::Stall> CheckHang();

  // Progress for the policy's cost estimate: the median step time of the
  // recent reports (0 before any), the newest step any rank reported, and
  // the run's last step as the ranks report it (0: unknown).
  double MedianStepSeconds() const;
  int64_t LatestStep() const { return latest_step_; }
  int64_t TotalSteps() const { return total_steps_; }

  // Per-rank medians and scores, the hang deadline, the last wavefront;
  // with `history`, each rank's kept steps in [first, last] (last 0: all).
  // At most kHistoryCells (step, rank) cells are kept per attempt, the
  // newest, at least kHistorySteps steps per rank; a reply carries at most
  // kReplyCells, the newest of the range (~19 bytes each: well inside a
  // 4 MiB control frame).
  static constexpr int64_t kHistoryCells = 256 << 10;
  static constexpr int64_t kHistorySteps = 100;
  static constexpr int64_t kReplyCells = 150000;
  control::DiagnoseReply Diagnose(bool history = false, int64_t first = 0,
                                  int64_t last = 0) const;
  void SetLastWavefront(std::string text) { wavefront_ = std::move(text); }

  // The node every currently slow pair has in common (its link is the
  // likely cause), if there is one: what `evict` removes for a slow link.
  std::optional<std::string> SlowLinkSuspect() const;
  // The median measured / predicted stage compute of a plan check that ran
  // since the last call (fault::PlanCheck::calibration), once; nullopt
  // otherwise. What the coordinator stores as the devices' calibration.
  std::optional<double> TakePlanCalibration();

 private:
  struct Pending {
    std::map<int, fault::StepSample> samples;
    std::map<int, double> wait;
    std::map<int, double> in_collectives;  // recorded share; those ranks only
    std::map<int, double> step_s;
  };
  std::vector<fault::FaultEvent> Feed(Pending& p);
  std::vector<fault::FaultEvent> CheckLinks();
  std::vector<fault::FaultEvent> CheckStages();

  const Clock& clock_;
  std::map<int, RankMeta> ranks_;
  fault::StragglerDetector stragglers_;
  fault::HangDetector hang_;
  fault::SlowLinkDetector links_;
  int64_t links_checked_ms_ = -1;
  std::vector<fault::FaultEvent> slow_now_;  // the last judgement's findings
  // Reported slow pairs -> judgements since they were last found slow.
  std::map<std::pair<std::string, std::string>, int> slow_reported_;
  std::vector<double> predicted_stage_s_;
  int64_t plan_checked_ms_ = -1;
  std::vector<fault::StageTime> stage_times_;  // the last plan check's
  fault::PlanCheck plan_check_;
  bool calibration_fresh_ = false;  // a plan check since TakePlanCalibration
  std::set<std::pair<fault::EventKind, int>> plan_reported_;
  bool hang_reported_ = false;
  bool recorded_ = false;  // a report carried recorder times (sticky)
  std::map<int64_t, Pending> pending_;  // step -> reports so far
  std::map<int, int64_t> last_step_;
  std::map<int, std::vector<double>> waits_, lates_;  // recent, for Diagnose
  std::string wavefront_;
  std::vector<double> step_seconds_;  // recent, any rank
  struct Cell {
    int64_t step;
    double compute, wait;
  };
  std::map<int, std::deque<Cell>> history_;
  int64_t latest_step_ = -1, total_steps_ = 0;
};

}  // namespace strata::coordinator
