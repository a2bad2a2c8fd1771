// Plans one attempt of a job on the workers it was given (on
// submit): builds a ClusterSpec from the workers' probes, takes the job's
// fixed parallelism or runs the planner, places ranks, and writes each
// rank's launch order with the environment of docs/placement.md.
#pragma once

#include <string>
#include <vector>

#include "common/status.h"
#include "proto/control.pb.h"
#include "proto/plan.pb.h"
#include "proto/topology.pb.h"

namespace strata::coordinator {

// Ranks started on a node: launch.ranks_per_node, else one per GPU, else 1.
int RanksPerNode(const JobSpec& spec, const control::NodeProbe& probe);

// The cluster as probed: one "device" per rank. For CPU-only nodes a device
// is one core at its measured single-thread rates: the SGEMM size curve
// (gemm_peak_gflops and gemm_half_dim; gemm_efficiency 1: the rate is
// already achieved, not peak) and the copy rate for memory-bound kernels and
// intra-node transfers (halved: strata-train moves fp32 where the cost model
// counts bf16 bytes) and the probed thread handoff as the latency of a
// collective step (on a busy node when the ranks outnumber the cores), with node memory / ranks; cpu_cores_per_node is the
// probed cores, which the node's ranks share (the cost model bounds a step
// by the node's work over its cores). NICs as found in sysfs (10 Gb/s
// Ethernet when the speed is unknown, e.g. veth/loopback simulated nodes).
// A node named in
// `node_speed` (node name -> speed relative to its probe, in (0, 1]: what
// a fault policy `rebalance` measured) gets a NodeOverride with its
// device's FLOP rate and memory bandwidth scaled by it, so the planner's
// layer split gives its pipeline stage fewer layers.
ClusterSpec ClusterFromProbes(
    const std::vector<control::WorkerInfo>& nodes, int ranks_per_node,
    const google::protobuf::Map<std::string, double>& node_speed = {});

// The coordinator's calibration of the devices on `nodes` (docs/planner.md
// "Calibration"): its store key, "calibration/<device>" (the first node's
// GPU name, or "cpu-core" without GPUs).
std::string CalibrationKey(const std::vector<control::WorkerInfo>& nodes);

// Devices that ran `compute_scale` times slower than the planner predicted
// (the median measured / predicted stage compute of earlier jobs' plan
// checks, fault/plan_check.h): divides every GPU type's FLOP rate and
// memory bandwidth by it and records it as the cluster's calibration
// (`source`), so plans say a calibration is applied. 1: no change.
void ScaleCompute(double compute_scale, const std::string& source,
                  ClusterSpec* cluster);

// The plan (parallelism + placement) of an attempt on `nodes`, in node
// order. With launch.model set the planner searches, honouring the job's
// constraints; otherwise TP/PP/CP come from the constraints (default 1) and
// DP takes the rest. InvalidArgument when the sizes do not divide the rank
// count, naming both.
// `compute_scale` (ScaleCompute) applies to planned jobs.
StatusOr<Plan> PlanAttempt(
    const JobSpec& spec, const std::vector<control::WorkerInfo>& nodes,
    const google::protobuf::Map<std::string, double>& node_speed = {},
    double compute_scale = 1.0);

// What STRATA_PLAN holds: the plan without the per-rank list and group
// member lists, which grow with the job (2 MB of JSON at 16,384 ranks,
// sent to every node). A rank's coordinates are in its environment and
// every group follows from the sizes and placement.order (tp-cp-dp-pp).
std::string PlanFileJson(const Plan& plan);

// Launch orders from the plan: launch_orders.h.

}  // namespace strata::coordinator
