// The plan a launcher runs (`strata plan --emit megatron|torchrun`): one
// owner, so every emitter describes the same plan, and a note whenever a
// launcher's constraint made that plan differ from the search's
// unconstrained best (docs/planner.md, "Emitting a plan").
#pragma once

#include <string>

#include "common/status.h"
#include "planner/search.h"
#include "proto/plan.pb.h"

namespace strata::planner {

struct LaunchPlan {
  Plan plan;  // the plan to emit, with its placement
  // Set when a launcher constraint changed the plan: the unconstrained
  // best (no placement).
  bool differs = false;
  Plan unconstrained;
  // '#' comment lines naming the constraint, what differs and both
  // predicted step times; empty when the plan is the unconstrained best.
  std::string note;
};

// Both emitters launch Megatron-LM (pretrain_gpt.py), so the plan is the
// best Megatron-compatible one (PlanRequest::megatron_compatible: ZeRO 0,
// or 1 as the distributed optimizer). Runs the unconstrained search too
// and, when its best differs, says how. Errors as PlanJob; when only the
// constraint leaves no plan (nothing fits, or --fix pins what Megatron
// cannot run), the message says so and names the unconstrained best.
StatusOr<LaunchPlan> PlanForLaunch(const PlanRequest& request);

// The fields of two plans' configurations that differ, e.g.
// "pp 8 vs 4, vpp 2 vs 3, zero 1 (distributed optimizer) vs 1".
std::string PlanDifferences(const Plan& a, const Plan& b);

// "tp=8 pp=4 dp=2 cp=1 vpp=5 mbs=1 zero=1 recompute=selective" of a plan.
std::string PlanConfiguration(const Plan& plan);

}  // namespace strata::planner
