// Probes the local node into the topology schema ("strata-worker"):
// CPU cores and NUMA nodes (hwloc), memory (sysconf), NICs with speed and
// type (/sys/class/net, loopback excluded), GPUs with memory and active
// NVLinks through NVML when libnvidia-ml is present (dlopen; never
// required), and measured rates: single-thread copy bandwidth,
// single-thread SGEMM throughput by size (the GEMM size curve,
// gemm_curve.h) and the latency of waking a thread. Impure; takes ~0.3 s;
// thread-compatible.
#pragma once

#include "common/status.h"
#include "proto/control.pb.h"

namespace strata::probe {

StatusOr<control::NodeProbe> ProbeNode();

}  // namespace strata::probe
