// What the coordinator does about a fault finding (docs/fault.md "Acting"),
// as pure functions of the finding, the job's policy and shape, and what
// acting costs: no clock, no store, no planner (a rebalance's prediction is
// asked of the injected PredictReplan, only when the decision needs it).
// The fault handler (coordinator/jobs/job_faults.h) gathers the inputs,
// stores the events the decision names and applies it.
//
// The rules, cheapest action first:
// - `report` stores the finding only;
// - any other action is taken only when it is worth a restart: a hang
//   always (no progress at all); a slowdown when the time it loses over the
//   remaining steps, step_s x (1 - 1/slowdown) x remaining, exceeds the
//   restart cost (measured on the job, else fault.restart_cost_s); unknown
//   total steps cannot be predicted and are never worth it;
// - `evict` takes the finding's node away unless that leaves fewer nodes
//   than the eviction floor (launch.min_nodes, else launch.nodes, 1 for an
//   elastic job) or the finding names no node;
// - `rebalance` re-plans with the node at its measured speed when the job
//   has a model to plan, the finding is slow compute on a named node, and
//   the planner predicts at least a 5% gain over running on as is (the job
//   runs at its slowest rank's pace: the plan's step time x slowdown);
// - a refused evict or rebalance falls back to a restart for a hang and to
//   a report otherwise.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "common/status.h"
#include "fault/event.h"
#include "fault/policy.h"
#include "proto/job.pb.h"

namespace strata::coordinator {

// The policy's action for a finding, the finding in words, and the node an
// evict or rebalance would act on ("" when it names none).
struct FaultAssessment {
  FaultPolicy::Action action = FaultPolicy::report;
  std::string summary;
  std::string node;
  // Steps beyond the baseline are lost to a slow rank, stage or link
  // (goodput's straggler cause); not to an unbalanced plan.
  bool slows_job = true;
};
// Which policy applies to `e` and what it is called: an unbalanced plan is
// reported only (the plan, not the hardware); a plan mismatch (a stage
// slower than predicted) and a straggler take the straggler policy; a slow
// link the slow_link policy, acting on `slow_link_suspect` (the node every
// slow pair shares).
FaultAssessment Assess(const fault::FaultEvent& e,
                       const fault::ResolvedPolicy& policy,
                       const std::optional<std::string>& slow_link_suspect);

// One finding with its job's shape.
struct FaultCase {
  fault::EventKind kind = fault::EventKind::kStraggler;
  double slowdown = 0;
  FaultAssessment assessed;
  int nodes = 0;             // nodes the running attempt uses
  int launch_nodes = 0;      // launch.nodes (0: as many as are free)
  int launch_min_nodes = 0;  // launch.min_nodes (0: unset)
  bool has_model = false;    // launch.model set: the planner can re-plan
  double node_speed = 1.0;   // the node's speed in the current plan
  double plan_step_s = 0;    // the current plan's predicted step time
};

// What acting costs and what the slowdown would lose.
struct FaultCosts {
  int64_t total_steps = 0;  // as the ranks report it; 0: unknown
  int64_t latest_step = 0;
  double median_step_s = 0;
  std::optional<double> measured_restart_s;  // failure -> first step
  double policy_restart_s = 30;              // fault.restart_cost_s
};

// Whether acting on the finding is worth a restart, and the figures behind
// it (empty for a hang).
std::pair<bool, std::string> WorthRestart(const FaultCase& c,
                                          const FaultCosts& costs);

// The planner's prediction for the job with `node` at `speed`.
struct ReplanPrediction {
  double step_s = 0;
  int tp = 1, pp = 1, dp = 1;
  std::vector<int> layers_per_stage;
};
using PredictReplan =
    std::function<StatusOr<ReplanPrediction>(const std::string& node,
                                             double speed)>;

struct FaultDecision {
  enum class Act { kNone, kRestart, kEvict, kRebalance };
  Act act = Act::kNone;
  // The event stored after the finding: "fault_action" (what was or was
  // not done), "evicted" or "rebalanced"; empty: none.
  std::string event_kind, event_text;
  std::string reason;      // kRestart/kEvict/kRebalance: the attempt's end
  std::string node;        // kEvict/kRebalance
  double node_speed = 0;   // kRebalance: the node's new speed
};

FaultDecision DecideFault(const FaultCase& c, const FaultCosts& costs,
                          const PredictReplan& predict);

}  // namespace strata::coordinator
