// Placement: maps every rank's (tp, cp, dp, pp) coordinates onto nodes and
// local GPUs and lists each group's members (docs/planner.md).
//
// Order is tp innermost, then cp, dp, pp (Megatron-LM's default): TP groups
// are consecutive ranks inside one node's NVLink domain, a stage's DP x CP
// ranks fill consecutive nodes (so DP groups stay under as few leaf switches
// as the stage size allows, as MegaScale does), and nodes arrive ordered by
// class from topology::SelectNodes, so on a mixed-NIC cluster each pipeline
// stage lands on one NIC type whenever the stage size divides the class size
// (Holmes).
#pragma once

#include <vector>

#include "planner/candidate.h"
#include "planner/network.h"
#include "proto/plan.pb.h"

namespace strata::planner {

struct RankCoord {
  int tp, cp, dp, pp;
};

// Coordinates of `rank` under the tp-cp-dp-pp order.
RankCoord CoordOf(const Candidate& c, int64_t rank);

// Builds the placement of `c` with `layers[i]` layers on stage i.
Placement BuildPlacement(const Candidate& c, const std::vector<int>& layers,
                         const Network& net);

}  // namespace strata::planner
