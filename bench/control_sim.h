// The simulated workers of `strata-bench control` (control_bench.cc): one
// child process drives `count` DEALER sockets as workers would, registering
// each with a probe, then heartbeating at 1 Hz and taking launch orders.
#pragma once

#include <string>

namespace strata::bench {

// CLOCK_MONOTONIC seconds: shared by every process of the benchmark.
double Now();
// RLIMIT_NOFILE raised to its hard limit (thousands of sockets).
void RaiseFdLimit();

// One child: simulates workers `first`..`first + count - 1`. Registers them
// (for at most `register_s` seconds; writes how many registered, an
// int32_t, to `ready_fd`), keeps them alive until it reads the measured
// phase's start time (a double) from `start_fd`, then heartbeats every
// worker at 1 Hz, spread over the second, for `seconds` plus `handout_s`
// (the hand-out phase after the submit). Writes the heartbeat round trips
// ("1 MS" steady, "2 MS" hand-out) and each worker's first order time
// ("o T", 0 if none) to `out`. Returns the process's exit code.
int RunChild(const std::string& endpoint, int first, int count, int ready_fd,
             int start_fd, double seconds, double register_s,
             double handout_s, const std::string& out);

}  // namespace strata::bench
