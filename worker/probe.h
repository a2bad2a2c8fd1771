// Probes the local node: CPU cores and NUMA nodes (hwloc), memory
// (sysconf), NICs (/sys/class/net, loopback excluded). GPUs are reported as 0
// because NVML probing is not implemented (no GPUs on the dev machines).
// Impure; thread-compatible.
#pragma once

#include "common/status.h"
#include "proto/control.pb.h"

namespace strata::worker {

StatusOr<control::NodeProbe> ProbeNode();

}  // namespace strata::worker
