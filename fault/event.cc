#include "fault/event.h"

namespace strata::fault {

const char* EventKindName(EventKind kind) {
  switch (kind) {
    case EventKind::kStraggler:
      return "straggler";
    case EventKind::kSlowLink:
      return "slow_link";
    case EventKind::kHang:
      return "hang";
    case EventKind::kPlanMismatch:
      return "plan_mismatch";
    case EventKind::kUnbalancedPlan:
      return "unbalanced_plan";
  }
  return "unknown";
}

}  // namespace strata::fault
