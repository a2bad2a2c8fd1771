// The hang wavefront: from every rank's flight-recorder summary, which
// collective each group is stuck in, which ranks wait in it and which never
// entered it.
//
// Per group, the collective the group waits in is the highest sequence
// number any member entered without every member completing it. Members
// that entered it wait (victims); members whose last entered sequence is
// lower never reached it, unless they are still inside an earlier
// collective of the group (entered, not completed: a hierarchical
// all-reduce lets some members finish before the others, who then wait
// there, e.g. for a stopped rank on their node): those are behind, and
// wait too. A rank missing in one group may itself be waiting
// in another (pipeline stages wait for each other), so the culprits are the
// ranks that are missing somewhere and waiting nowhere; when every member
// entered and none completed, data stopped moving (a link or a wedged
// transfer) and the group has no missing rank. Follows the flight-recorder
// analysis of PyTorch (c10d) and NVIDIA's fr_attribution. Pure.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace strata::fault {

// One rank's last operation in one group (from its flight recorder).
struct GroupProgress {
  int rank = 0;
  std::string group;           // e.g. "tp0", "dp1", "pp0"
  int64_t entered_seq = -1;    // last sequence number entered (-1: none)
  int64_t completed_seq = -1;  // last sequence number completed
  std::string op;              // op of `entered_seq`, e.g. "all_reduce"
};

struct GroupWavefront {
  std::string group;
  int64_t seq = -1;          // the collective the group is stuck in
  std::string op;
  std::vector<int> waiting;  // entered `seq`, not completed (ascending)
  std::vector<int> missing;  // never entered `seq` (ascending)
  std::vector<int> behind;   // inside an earlier collective (ascending)
  std::vector<int> done;     // completed `seq` (ascending)
};

struct Wavefront {
  std::vector<GroupWavefront> groups;  // stuck groups only, by name
  std::vector<int> culprits;           // missing somewhere, waiting nowhere
};

Wavefront ComputeWavefront(const std::vector<GroupProgress>& progress);

// "group dp0 stuck in all_reduce #12: waiting 0,1,2; never entered 3"
// (and "; still inside an earlier one 2,3" for ranks behind).
std::string DescribeWavefront(const Wavefront& w);

}  // namespace strata::fault
