// Launch arguments for a plan: Megatron-LM flags and a torchrun command.
#pragma once

#include <string>

#include "proto/model.pb.h"
#include "proto/plan.pb.h"
#include "proto/topology.pb.h"

namespace strata::planner {

// Both emitters take the plan from PlanForLaunch (planner/launch_plan.h),
// so for one request they launch the same plan; `note` (its '#' lines, or
// empty) says how that plan differs from the unconstrained best.

// Megatron-LM (megatron/training/arguments.py) flags for `plan` and the
// model's shape, one flag per line, ending in " \" except the last. Layer
// splits Megatron cannot express are reported in a leading '#' comment.
std::string EmitMegatron(const Plan& plan, const ModelSpec& model,
                         const std::string& note = "");

// A torchrun command (with the strata placement variables of docs/placement.md)
// that runs Megatron-LM's pretrain_gpt.py with EmitMegatron's flags.
std::string EmitTorchrun(const Plan& plan, const ModelSpec& model,
                         const ClusterSpec& cluster, int64_t gpus,
                         const std::string& note = "");

}  // namespace strata::planner
