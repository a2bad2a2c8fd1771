// What a worker tells the coordinator about a rank of a hung attempt
// (docs/fault.md "Hangs"): per process group, the last collective the rank
// entered and the last it finished, from its flight recorder
// (comm/flight_recorder.h, readable while the rank is stopped or wedged),
// and where its threads are blocked (/proc: state and kernel wait channel;
// no ptrace, so it never blocks the worker; the backtrace is added by
// worker/stack_dump.h). Errors go into `error`.
#pragma once

#include <string>

#include "proto/control.pb.h"

namespace strata::worker {

control::RankFlight ReadRankFlight(const std::string& job_id, int attempt,
                                   int rank, int pid);

// Every operation the rank's flight recorder still holds, oldest first, for
// `strata trace` (docs/observe.md "Traces"); times on this node's wall
// clock. Errors go into `error`.
control::RankTrace ReadRankTrace(const std::string& job_id, int attempt,
                                 int rank, int pid);

}  // namespace strata::worker
