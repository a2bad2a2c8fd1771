#include "train/threads.h"

#include <sched.h>

#include <algorithm>
#include <cstdlib>
#include <string>

namespace strata::train {

int AffinityCpus() {
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof(set), &set) != 0) return 1;
  return std::max(1, CPU_COUNT(&set));
}

int ThreadsPerRank(int local_ranks) {
  if (const char* env = std::getenv("STRATA_THREADS_PER_RANK")) {
    char* end = nullptr;
    const long n = std::strtol(env, &end, 10);
    if (end != env && *end == '\0' && n >= 1 && n <= 1024) {
      return static_cast<int>(n);
    }
  }
  return std::max(1, AffinityCpus() / std::max(1, local_ranks));
}

}  // namespace strata::train
