// Cluster topology: loading and checking a ClusterSpec, and expanding it into
// the concrete nodes a job of a given size runs on (docs/planner.md, the
// "model" layer of probe -> model -> plan). Pure functions; no I/O except
// loading.
#pragma once

#include <string>
#include <vector>

#include "absl/types/span.h"
#include "common/field_range.h"
#include "common/status.h"
#include "proto/topology.pb.h"

namespace strata::topology {

// Loads a cluster from a YAML/JSON file or an embedded preset
// (topology/presets/*.yaml) and validates it.
StatusOr<ClusterSpec> LoadCluster(const std::string& file_or_preset);
std::vector<std::string> ClusterPresetNames();

// Largest accepted node count and GPUs per node (ClusterRanges).
inline constexpr int kMaxClusterNodes = 131072;
inline constexpr int kMaxGpusPerNode = 4096;

// The documented range of every numeric ClusterSpec field (docs/config.md).
absl::Span<const FieldRange> ClusterRanges();

// InvalidArgument naming the first missing, out-of-range (ClusterRanges:
// field, value, range) or inconsistent field.
Status ValidateCluster(const ClusterSpec& cluster);

// One node as a plan sees it.
struct NodeInfo {
  int index = 0;                  // node index in the cluster
  const GpuType* gpu = nullptr;   // points into the ClusterSpec
  Nic::Type nic_type = Nic::ib;   // type of the node's fastest NIC group
  double nic_gbytes_per_gpu = 0;  // NIC line rate per GPU, GB/s
  int leaf = 0;                   // leaf switch index
  int pod = 0;                    // pod index
  int node_class = 0;  // nodes with equal GPU type and NICs share a class
};

// Total GPUs in the cluster, or 0 when it is unbounded (num_nodes absent).
int64_t ClusterGpus(const ClusterSpec& cluster);

// The nodes a job of `num_nodes` nodes gets. Homogeneous clusters give the
// first nodes. Clusters with overrides give each node class its share in
// proportion to its size (so half-IB/half-RoCE stays half and half), and the
// result is ordered by class, then index, so consecutive ranks share a
// class. `cluster` must outlive the result. OutOfRange when the cluster is
// too small.
StatusOr<std::vector<NodeInfo>> SelectNodes(const ClusterSpec& cluster,
                                            int num_nodes);

const char* NicTypeName(Nic::Type type);

}  // namespace strata::topology
