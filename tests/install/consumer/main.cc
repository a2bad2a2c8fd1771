// A rank program of a user, built against an installed strata (find_package
// or pkg-config) by tests/install/install_test.sh: prints what it read from
// its placement and reports one step through the C++ wrapper.
#include <cstdio>

#include "strata/strata.hpp"

int main() {
  try {
    strata::Runtime rt;
    const strata_placement& p = rt.placement();
    std::printf("consumer rank=%d world=%d local_rank=%d local_world=%d job=%s\n",
                p.rank, p.world_size, p.local_rank, p.local_world_size,
                rt.job_id().c_str());
    rt.EndStep(1, 0, 0.5);
    return 0;
  } catch (const strata::Error& e) {
    std::fprintf(stderr, "consumer: %s\n", e.what());
    return 1;
  }
}
