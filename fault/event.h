// What the fault detectors report: one FaultEvent per finding, with the
// evidence that led to it. The coordinator stores events and `strata events`
// prints them; the field names are the ones users see (docs/fault.md).
#pragma once

#include <cstdint>
#include <string>

namespace strata::fault {

enum class EventKind {
  kStraggler,      // a rank computes slower than its peers or its baseline
  kSlowLink,       // a node pair moves data slower than the reference
  kHang,           // no step progress past the learned deadline
  kPlanMismatch,   // a stage's measured/predicted ratio stands out
  kUnbalancedPlan, // stages differ as predicted: the plan, not the hardware
};

// "straggler", "slow_link", "hang", "plan_mismatch", "unbalanced_plan".
const char* EventKindName(EventKind kind);

struct FaultEvent {
  EventKind kind = EventKind::kStraggler;
  int64_t step = -1;      // step the finding was made at; -1 if none
  int rank = -1;          // -1 when the finding is about nodes or stages
  std::string node;       // node of `rank`, or the link's source node
  std::string peer_node;  // slow_link: the destination node
  int stage = -1;         // plan findings: pipeline stage
  double slowdown = 0;    // factor against the reference (1.3 = 30% slower)
  std::string section;    // straggler: the section that is slowest
  std::string evidence;   // human-readable numbers behind the finding
  // straggler: the arrivals behind it are only the waits the ranks report
  // themselves (no flight recorder readings, e.g. torch's own
  // collectives), which one rank can inflate to make a peer look late: such
  // a finding is reported, never acted on (docs/security.md).
  bool self_reported = false;
};

}  // namespace strata::fault
