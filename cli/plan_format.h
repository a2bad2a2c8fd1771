// Human-readable rendering of a PlanReport (`strata plan --format table`).
#pragma once

#include <string>

#include "proto/plan.pb.h"
#include "proto/topology.pb.h"

namespace strata::cli {

// Aligned table with units, the winner marked '*'. With `explain`, each
// plan's time and memory breakdown, how it differs from the winner, and the
// winner's placement (groups, stages, layers, NIC types).
std::string FormatPlanTable(const PlanReport& report,
                            const ClusterSpec& cluster, bool explain);

}  // namespace strata::cli
