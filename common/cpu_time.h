// CPU time the calling thread has used (CLOCK_THREAD_CPUTIME_ID): what a
// piece of work cost, not how long it waited. Not a Clock (common/clock.h):
// it is measured, never injected.
#pragma once

#include <time.h>

namespace strata {

// Seconds of CPU the calling thread has used since it started.
inline double ThreadCpuSeconds() {
  timespec ts{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return ts.tv_sec + ts.tv_nsec * 1e-9;
}

}  // namespace strata
