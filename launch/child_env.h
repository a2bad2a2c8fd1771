// The environment of the command strata-exec runs: what it inherited, minus
// what ties it to the mpirun job or to another launcher, plus the rank
// environment (placement/rank_env.h). Pure, unit-tested
// (tests/unit/launch/child_env_test.cc).
#pragma once

#include <string>
#include <vector>

#include "placement/rank_env.h"

namespace strata::launch {

// `inherited` ("NAME=value" strings, e.g. environ) minus the variables that
// tie a process to the mpirun job (OMPI_*, PMIX_*: the command is not that
// MPI process; if it calls MPI_Init it starts as a singleton) and stale
// placement variables strata-exec cannot fill (STRATA_PLAN,
// STRATA_TELEMETRY), plus `vars`, which override.
std::vector<std::string> ChildEnvironment(
    const std::vector<std::string>& inherited, const placement::EnvMap& vars);

}  // namespace strata::launch
