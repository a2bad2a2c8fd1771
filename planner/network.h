// Collective and point-to-point costs on the cluster's links (docs/planner.md).
//
// Cost model: the alpha-beta ring model of Thakur et al. (2005) with the
// bandwidth terms of nccl-tests (all-reduce moves 2(n-1)/n of the buffer per
// rank, reduce-scatter and all-gather (n-1)/n), extended to the two-level
// hierarchical algorithm of comm/ (intra-node reduce-scatter, inter-node
// all-reduce among same-local-rank peers, intra-node all-gather), which is
// what NCCL's ring/tree over NVLink + NICs achieves.
#pragma once

#include <cstdint>
#include <utility>
#include <vector>

#include "topology/cluster.h"

namespace strata::planner {

// Achieved fraction of line rate, by link kind. Sources in docs/planner.md:
// NDR IB reaches 46-48 of 50 GB/s in nccl-tests (NVIDIA, nccl-tests issue
// 290); NVSwitch all-reduce reaches ~70% of per-direction NVLink with NCCL
// rings (calibrated against Megatron SC'21 Table 1, docs/planner.md).
inline constexpr double kIbEfficiency = 0.93;
inline constexpr double kRoceEfficiency = 0.90;
inline constexpr double kEthernetEfficiency = 0.60;
inline constexpr double kNvlinkEfficiency = 0.65;
// Per-step latencies (alpha), seconds.
inline constexpr double kNvlinkLatency = 5e-6;
inline constexpr double kNicLatency = 10e-6;

// The links one group of ranks uses.
struct GroupLink {
  int members_per_node = 1;                 // r: group members sharing a node
  int nodes = 1;                            // k: nodes the group spans
  double intra_gbps = 0;                    // effective NVLink GB/s per GPU
  double intra_latency_s = kNvlinkLatency;  // per collective step
  double nic_gbps = 0;    // effective NIC GB/s per GPU (before oversub.)
  double inter_gbps = 0;  // effective NIC GB/s per GPU (after oversub.)
  Nic::Type nic_type = Nic::ib;
  bool mixed_nic_types = false;
  double min_peak_tflops = 0;    // slowest GPU among the nodes
  const GpuType* gpu = nullptr;  // GPU type of the slowest node
};

class Network {
 public:
  // `nodes` are the job's nodes in rank order (topology::SelectNodes).
  Network(const ClusterSpec& cluster, std::vector<topology::NodeInfo> nodes);

  int gpus_per_node() const { return gpus_per_node_; }
  // The nodes' host side (offload) and the cluster's calibration.
  const HostSpec& host() const { return host_; }
  const Calibration& calibration() const { return calibration_; }
  // ClusterSpec.cpu_cores_per_node: the cores CPU ranks share; 0 for GPUs.
  int cpu_cores_per_node() const { return cpu_cores_per_node_; }
  const std::vector<topology::NodeInfo>& nodes() const { return nodes_; }

  // Links of a group of `group_size` ranks, `members_per_node` of them per
  // node, whose nodes are those of the ranks first .. first + span - 1
  // (for a stage's DP x CP group, span = the stage's ranks).
  // `stage_nodes` is the number of nodes per pipeline stage (PhysicalNode).
  GroupLink Link(int64_t first_rank, int64_t span, int members_per_node,
                 int group_size, int stage_nodes) const;
  // The job's nodes of ranks first .. first + span - 1 (Link's a and b).
  std::pair<int64_t, int64_t> NodeSpan(int64_t first_rank, int64_t span) const;
  // The switch oversubscription traffic among the job's nodes a .. b meets:
  // 1 within a leaf, the leaf's across leaves, both factors across pods.
  double Oversubscription(int64_t a, int64_t b, int stage_nodes) const;
  // Every node has the same GPU type (the same object) and NICs: then only
  // Oversubscription tells two groups' links apart.
  bool identical_nodes() const { return identical_; }

  // Cluster index of the job's `j`-th node when each pipeline stage spans
  // `stage_nodes` nodes. On a homogeneous cluster with nodes to spare, each
  // leaf switch takes only whole stages, so no stage (and no DP group)
  // straddles two leaves (MegaScale, Jiang et al. NSDI'24 §3.4); otherwise
  // the nodes of SelectNodes in order.
  int PhysicalNode(int64_t j, int stage_nodes) const;

  // Seconds for collectives of `bytes` per rank over `link`.
  static double AllReduce(double bytes, const GroupLink& link);
  static double ReduceScatter(double bytes, const GroupLink& link);
  static double AllGather(double bytes, const GroupLink& link) {
    return ReduceScatter(bytes, link);
  }
  // Ring collective entirely inside a node among n GPUs.
  double IntraAllReduce(double bytes, int n) const;
  // One point-to-point transfer between neighbouring pipeline stages.
  double P2P(double bytes, bool crosses_nodes, const GroupLink& link) const;

 private:
  int gpus_per_node_;
  double intra_gbps_;
  // ClusterSpec.intra_node_latency_s (ApplyCalibration sets the fitted
  // one), else kNvlinkLatency.
  double intra_latency_s_;
  double oversubscription_;
  double pod_oversubscription_;
  int nodes_per_leaf_;
  int leaves_per_pod_;
  int cluster_nodes_;  // 0 = unbounded
  bool homogeneous_;   // one node class (PhysicalNode)
  bool identical_;     // identical_nodes()
  std::vector<topology::NodeInfo> nodes_;
  HostSpec host_;
  Calibration calibration_;
  int cpu_cores_per_node_;
};

}  // namespace strata::planner
