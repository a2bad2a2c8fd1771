// The planner's placement: which nodes a candidate's ranks run on and the
// NIC type of every group and stage (docs/planner.md). Coordinates and
// group membership are placement/'s (placement::FixedPlacement); this adds
// what needs the network.
//
// Ranks keep the tp-cp-dp-pp order (placement/order.h): TP groups are
// consecutive ranks inside one node's NVLink domain, a stage's DP x CP
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

// Builds the placement of `c` with `layers[i]` layers on stage i: logical
// node j (ranks [j g, (j + 1) g), g = GPUs per node) on
// net.PhysicalNode(j, nodes per stage), the groups of placement::AddGroups
// plus MoE's EP and ETP groups, every group and stage labelled with its
// nodes' NIC type ("mixed" when they differ).
Placement BuildPlacement(const Candidate& c, const std::vector<int>& layers,
                         const Network& net);

}  // namespace strata::planner
