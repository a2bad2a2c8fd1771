// What a worker tells the coordinator about a rank of a hung attempt
// (docs/fault.md "Hangs"): per process group, the last collective the rank
// entered and the last it finished, from its flight recorder
// (comm/flight_recorder.h, readable while the rank is stopped or wedged),
// and where its threads are blocked (/proc: state and kernel wait channel;
// no ptrace, so it never blocks the worker; the backtrace is added by
// worker/stack_dump.h). Errors go into `error`.
#pragma once

#include <string>

#include "common/status.h"
#include "proto/control.pb.h"

namespace strata::worker {

control::RankFlight ReadRankFlight(const std::string& job_id, int attempt,
                                   int rank, int pid);

// Every operation the rank's flight recorder still holds, oldest first, for
// `strata trace` (docs/observe.md "Traces"); times on this node's wall
// clock. Errors go into `error`.
control::RankTrace ReadRankTrace(const std::string& job_id, int attempt,
                                 int rank, int pid);

// Arrival evidence for straggler detection (docs/security.md "Straggler
// evidence"): of the interval [now_ns - window_ns, now_ns] on this node's
// wall clock, the share the rank spent inside collectives (entered to
// finished, clipped to the interval, overlapping operations counted once)
// and how many of them finished in it. From the recorder of (job, rank,
// pid), checked as for ReadRankFlight.
struct RecordedShare {
  int ops = 0;
  double share = 0;
};
StatusOr<RecordedShare> ReadRecordedShare(const std::string& job_id, int rank,
                                          int pid, int64_t now_ns,
                                          int64_t window_ns);

}  // namespace strata::worker
