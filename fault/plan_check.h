// Plan vs measured: each pipeline stage's measured time against the
// planner's prediction, to tell an unbalanced plan from degraded hardware.
//
// The ratio measured/predicted of every stage is divided by the median ratio
// of the other stages (the calibration: the cost model may be off by a
// constant factor on this machine, which is not a fault; the stage itself
// is left out so that with two stages a slow one is not half hidden in the
// mean). A stage whose calibrated ratio reaches the threshold runs slower
// than the plan says it should compared with the others: degraded hardware
// or a straggler in that stage (plan_mismatch; its slowdown is that
// ratio). If no stage stands out but the measured stage times
// themselves differ by the threshold, the stages are as uneven as predicted:
// the plan is unbalanced, not the hardware (unbalanced_plan). Comparing
// measured with predicted time is what separates the two causes that the
// straggler study of ByteDance/NYU (OSDI'25) found dominate: computation
// imbalance across stages versus bad machines. Pure.
#pragma once

#include <vector>

#include "fault/event.h"

namespace strata::fault {

struct StageTime {
  int stage = 0;
  double predicted_s = 0;  // the planner's per-step time of the stage
  double measured_s = 0;   // median measured compute time of the stage
};

struct PlanCheck {
  double calibration = 1;                // median measured/predicted, all
  std::vector<double> calibrated_ratio;  // per input stage, vs the others
  std::vector<FaultEvent> events;        // plan_mismatch / unbalanced_plan
};

// REQUIRES: predicted_s > 0 and measured_s > 0 for every stage.
PlanCheck CheckPlan(const std::vector<StageTime>& stages,
                    double threshold = 1.15);

}  // namespace strata::fault
