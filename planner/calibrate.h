// Self-calibration (docs/planner.md "Calibration"): fit the cost model's
// device constants to measured runs, store the fit per cluster, apply it.
//
// The fitted constants (Calibration, proto/topology.proto): the large-GEMM
// efficiency and the GEMM size curve's half-saturation dimension (from the
// GEMMs' measured rate by shape and the step times), the memory-bound
// kernel rate, a fixed cost per layer per micro-batch, the intra-node
// collective bandwidth and per-step latency (from the step times of layouts
// that use TP, PP and DP), that latency again for CPU ranks that outnumber
// their cores, and the node load.
#pragma once

#include <string>
#include <vector>

#include "common/status.h"
#include "proto/control.pb.h"
#include "proto/topology.pb.h"

namespace strata::planner {

// One measurement's step time before and after the fit.
struct FitError {
  std::string what;  // "ranks=4 tp=2 pp=1 dp=2"
  double measured_s = 0;
  double before_s = 0;  // predicted with the cluster as given
  double after_s = 0;   // predicted with the fit
};

// Fits a calibration to `runs` (Nelder-Mead on the log-parameters,
// minimising the squared log error of every step time, plus the GEMMs'
// per-call times when `runs.gemms` is not empty). InvalidArgument naming
// the field when runs are missing or inconsistent. `errors` (optional)
// receives every step measurement's prediction before and after.
StatusOr<Calibration> FitCalibration(const MeasuredRuns& runs,
                                     std::vector<FitError>* errors = nullptr);

// Devices below this peak are CPU ranks (a 2-socket server's cores reach a
// few TFLOP/s of SGEMM; the smallest datacenter GPUs tens).
inline constexpr double kCpuDevicePeakTflops = 5;
// strata-train computes and communicates in fp32 (docs/train.md): every
// activation and gradient byte the cost model sends between ranks (bf16)
// is two bytes between CPU ranks, so their transfer rate is given to the
// cost model halved. (Its optimizer bytes, 12 of state and master weights
// per parameter, are what fp32 AdamW moves; memory-bound kernels on CPU
// work on a layer's micro-batch in cache, so their rate is not halved.)
inline constexpr double kCpuBytesPerModelByte = 2.0;

// What a worker probe (`strata probe`, control.NodeProbe) measures of
// `cluster`: the TCP bandwidth to a peer over the cluster's fastest single
// NIC (inter_node_scale, when the probe measured a peer) and, for CPU-only
// nodes of a cluster of CPU ranks, the node's memory rate
// (node_memory_gbps: each rank at the single-thread copy rate).
// InvalidArgument when the probe measured neither.
StatusOr<Calibration> CalibrationFromProbe(const control::NodeProbe& probe,
                                           const ClusterSpec& cluster);

// The predicted step time of runs.steps(i) on its cluster with `cal`.
StatusOr<double> PredictMeasured(const MeasuredRuns& runs, int i,
                                 const Calibration& cal);

// Applies `cluster.calibration` to the fields the cost model reads: every
// GPU type's gemm_efficiency, gemm_half_dim and hbm_gbps (node_memory_gbps /
// devices per node), and both rates by the node load (a calibration measures
// one device type and stands for all of the cluster's), the intra-node rate
// (stored as the effective rate: divided by the NVLink efficiency that the
// network model multiplies back) and the NIC rates. layer_overhead_s is
// read by the cost model itself. No-op without one; idempotent (the NIC scale
// is cleared once applied).
void ApplyCalibration(ClusterSpec* cluster);

// CPU ranks that outnumber their node's cores (cpu_cores_per_node > 0 and
// below gpus_per_node): a woken rank waits for a core at every step, so
// the shared-core latency applies instead of the intra-node one.
bool RanksOutnumberCores(const ClusterSpec& cluster);

// Where the fit of cluster `cluster_arg` (a file path or a preset/probed
// name) is stored: "<file>.calibration.json" next to a cluster file, else
// "$STRATA_CALIBRATION_DIR/<name>.json", default
// "$HOME/.strata/calibration/<name>.json".
std::string CalibrationPath(const std::string& cluster_arg,
                            const std::string& cluster_name);

Status SaveCalibration(const std::string& path, const Calibration& cal);
// NotFound when there is no stored fit; InvalidArgument when it is not a
// valid Calibration (ranges as ClusterRanges' calibration.*).
StatusOr<Calibration> LoadCalibration(const std::string& path);

}  // namespace strata::planner
