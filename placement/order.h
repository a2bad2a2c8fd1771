// The rank order every part of strata agrees on (docs/placement.md
// "Coordinates"): tp-cp-dp-pp, TP innermost, then CP, DP and PP outermost
// (Megatron-LM's default order, megatron/core/parallel_state.py), so a TP
// group is consecutive ranks and a pipeline stage is one contiguous block.
//
//   rank = tp_rank + TP * (cp_rank + CP * (dp_rank + DP * pp_rank))
//
// This header is the one implementation of that formula (CoordOf, RankOf),
// of "DP takes the ranks TP x PP x CP leave" (DataParallelSize) and of
// which ranks form each TP, CP, DP and PP group (AddGroups). Pure
// functions, no state.
#pragma once

#include <cstdint>

#include "proto/plan.pb.h"

namespace strata::placement {

// The parallel sizes of a job's dense layers; every size >= 1.
struct Sizes {
  int tp = 1, cp = 1, dp = 1, pp = 1;
  int64_t Ranks() const { return static_cast<int64_t>(tp) * cp * dp * pp; }
};

// A rank's position along each parallel dimension, each in [0, size).
struct Coord {
  int tp = 0, cp = 0, dp = 0, pp = 0;
  bool operator==(const Coord&) const = default;
};

// The coordinates of `rank` (in [0, s.Ranks())).
Coord CoordOf(const Sizes& s, int64_t rank);

// The rank at `c`: the inverse of CoordOf.
int64_t RankOf(const Sizes& s, const Coord& c);

// DP when `world` ranks are split by TP x PP x CP: world / (tp pp cp), or 0
// when a size is < 1 or the product does not divide `world`.
int DataParallelSize(int64_t world, int tp, int pp, int cp);

// Appends to `pl` the groups of `s`: for each kind in the order tp, cp, dp,
// pp, one group per value of the three other coordinates (PP outermost, TP
// innermost), numbered from 0 within its kind; a group's members are the
// ranks that differ only in its kind's coordinate, in order of that
// coordinate (member i has coordinate i). nic_type is left unset. Sizes of
// 1 give one-member groups, so every rank is in exactly one group of each
// kind (what comm::BuildPlanGroups requires).
void AddGroups(const Sizes& s, Placement* pl);

}  // namespace strata::placement
