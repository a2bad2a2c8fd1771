#include "topology/cluster.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <tuple>

#include "absl/strings/str_cat.h"
#include "common/preset.h"

namespace strata {
extern const EmbeddedFile kClusterPresets[];
extern const int kClusterPresets_count;
}  // namespace strata

namespace strata::topology {
namespace {

// NIC summary of a node: per-GPU line rate (GB/s) and the dominant type.
std::pair<double, Nic::Type> NicSummary(
    const google::protobuf::RepeatedPtrField<Nic>& nics, int gpus_per_node) {
  double total_gbit = 0, best = -1;
  Nic::Type type = Nic::ib;
  for (const Nic& n : nics) {
    double g = n.count() * n.gbps();
    total_gbit += g;
    if (g > best) {
      best = g;
      type = n.type();
    }
  }
  return {total_gbit / 8.0 / gpus_per_node, type};
}

}  // namespace

const char* NicTypeName(Nic::Type type) {
  switch (type) {
    case Nic::ib:
      return "ib";
    case Nic::roce:
      return "roce";
    case Nic::ethernet:
      return "ethernet";
    default:
      return "unknown";
  }
}

std::vector<std::string> ClusterPresetNames() {
  return PresetNames(kClusterPresets, kClusterPresets_count);
}

absl::Span<const FieldRange> ClusterRanges() {
  // GPU and NIC bounds sit one to two orders of magnitude above today's
  // hardware (H100: 989 TFLOP/s, 80 GiB, 3350 GB/s HBM, 450 GB/s NVLink,
  // 400 Gb/s NICs).
#define STRATA_GPU_RANGES(prefix)                                     \
  {prefix "gpu.peak_bf16_tflops", 0, 100000, true, "TFLOP/s"},        \
      {prefix "gpu.memory_gib", 0, 100000, true, "GiB"},              \
      {prefix "gpu.gemm_efficiency", 0, 1, true, "fraction of peak"}, \
      {prefix "gpu.hbm_gbps", 0, 1000000, true, "GB/s"},              \
      {prefix "gpu.peak_fp8_tflops", 0, 100000, false,                \
       "dense FP8 TFLOP/s; absent or 0: no FP8"},                     \
      {prefix "gpu.gemm_half_dim", 0, 100000, false,                  \
       "GEMM half-saturation size; absent or 0: 128"},                \
  {                                                                   \
    prefix "gpu.fp8_gemm_efficiency", 0, 1, true,                     \
        "fraction of FP8 peak; absent: gemm_efficiency"               \
  }
  static constexpr FieldRange kRanges[] = {
      STRATA_GPU_RANGES(""),
      {"gpus_per_node", 1, kMaxGpusPerNode, false, "GPUs (or CPU ranks)"},
      {"intra_node_gbps", 0, 1000000, true, "GB/s per GPU, one direction"},
      {"intra_node_latency_s", 0, 1, false,
       "intra-node collective step latency, s; absent or 0: NVLink's"},
      {"cpu_cores_per_node", 0, 1 << 20, false,
       "cores a node's CPU ranks share; absent or 0: GPUs"},
      {"nics", 0, 64, false, "NIC groups per node"},
      {"nics.count", 1, 1024, false, "NICs of the group"},
      {"nics.gbps", 0, 1000000, true, "Gb/s per NIC"},
      {"network.nodes_per_leaf", 1, kMaxClusterNodes, false, "absent: 1"},
      {"network.leaves_per_pod", 1, kMaxClusterNodes, false, "absent: 1"},
      {"network.oversubscription", 1, 1000, false, "absent: 1 (non-blocking)"},
      {"network.pod_oversubscription", 1, 1000, false, "absent: 1"},
      {"num_nodes", 1, kMaxClusterNodes, false,
       "absent: as many as a plan asks for"},
      {"overrides", 0, 256, false, "node ranges with other GPUs or NICs"},
      {"overrides.first_node", 0, kMaxClusterNodes - 1, false, "node index"},
      {"overrides.num_nodes", 1, kMaxClusterNodes, false, "nodes"},
      {"overrides.nics", 0, 64, false, "NIC groups; none: the default"},
      {"overrides.nics.count", 1, 1024, false, "NICs of the group"},
      {"overrides.nics.gbps", 0, 1000000, true, "Gb/s per NIC"},
      STRATA_GPU_RANGES("overrides."),
      {"host.cpu_memory_gib", 0, 1000000, false,
       "CPU memory per node, GiB; 0 or absent: no CPU offload"},
      {"host.pcie_gbps", 0, 10000, false,
       "host<->GPU GB/s per GPU, one direction; 0: no offload"},
      {"host.cpu_adam_gparams", 0, 10000, false,
       "CPU Adam, 1e9 params/s per node; 0 or absent: 4 (ZeRO-Offload)"},
      {"host.nvme_gbps", 0, 100000, false,
       "NVMe GB/s per node; 0 or absent: no NVMe offload"},
      {"host.nvme_gib", 0, 100000000, false,
       "NVMe GiB per node for offload; 0 or absent: no NVMe offload"},
      {"calibration.gemm_efficiency", 0, 1, false,
       "fitted large-GEMM fraction of peak; 0: the GPU's"},
      {"calibration.gemm_half_dim", 0, 100000, false,
       "fitted GEMM half-saturation size; 0: 128"},
      {"calibration.node_memory_gbps", 0, 10000000, false,
       "fitted memory-bound rate per node, GB/s; 0: hbm_gbps x devices"},
      {"calibration.intra_node_gbps", 0, 1000000, false,
       "fitted intra-node collective GB/s per GPU; 0: intra_node_gbps"},
      {"calibration.layer_overhead_s", 0, 10, false,
       "fitted fixed seconds per layer per micro-batch (forward)"},
      {"calibration.samples", 0, 1000000, false, "measurements fitted"},
      {"calibration.rms_error_before", 0, 1000, false,
       "relative step-time error before the fit"},
      {"calibration.rms_error_after", 0, 1000, false,
       "relative step-time error after the fit"},
      {"calibration.inter_node_scale", 0, 100, false,
       "fitted NIC rate / nominal; 0: 1"},
      {"calibration.node_load", 0, 1000, false,
       "fitted competing work per node, in devices; 0: none"},
      {"calibration.intra_node_latency_s", 0, 1, false,
       "fitted intra-node collective step latency, s; 0: 5e-6"},
      {"calibration.shared_core_latency_s", 0, 1, false,
       "fitted step latency when CPU ranks outnumber cores, s; 0: the "
       "intra-node one"},
      {"calibration.gemm_peak_tflops", 0, 100000, false,
       "device peak the fit stands for, TFLOP/s; 0: the cluster's"},
  };
#undef STRATA_GPU_RANGES
  return kRanges;
}

Status ValidateCluster(const ClusterSpec& c) {
  const std::string where = absl::StrCat("cluster '", c.name(), "'");
  if (!c.has_gpu()) {
    return absl::InvalidArgumentError(where + ": field 'gpu' is missing");
  }
  RETURN_IF_ERROR(CheckRanges(c, ClusterRanges(), where));
  if (c.nics_size() == 0 && c.num_nodes() != 1) {
    return absl::InvalidArgumentError(
        where + ": field 'nics' is empty; multi-node clusters need NICs");
  }
  for (int i = 0; i < c.overrides_size(); ++i) {
    const NodeOverride& o = c.overrides(i);
    const std::string f = absl::StrCat(where, " overrides[", i, "]");
    if (!c.has_num_nodes()) {
      return absl::InvalidArgumentError(f +
                                        ": overrides need a fixed 'num_nodes'");
    }
    if (static_cast<int64_t>(o.first_node()) + o.num_nodes() > c.num_nodes()) {
      return absl::InvalidArgumentError(
          absl::StrCat(f, ": node range [", o.first_node(), ", ",
                       static_cast<int64_t>(o.first_node()) + o.num_nodes(),
                       ") is outside the cluster's ", c.num_nodes(), " nodes"));
    }
  }
  return absl::OkStatus();
}

StatusOr<ClusterSpec> LoadCluster(const std::string& file_or_preset) {
  ClusterSpec cluster;
  RETURN_IF_ERROR(LoadConfigOrPreset(file_or_preset, kClusterPresets,
                                     kClusterPresets_count, "cluster", &cluster,
                                     ClusterRanges()));
  if (cluster.name().empty()) cluster.set_name(file_or_preset);
  RETURN_IF_ERROR(ValidateCluster(cluster));
  return cluster;
}

int64_t ClusterGpus(const ClusterSpec& c) {
  return static_cast<int64_t>(c.num_nodes()) * c.gpus_per_node();
}

StatusOr<std::vector<NodeInfo>> SelectNodes(const ClusterSpec& c,
                                            int num_nodes) {
  if (num_nodes <= 0) {
    return absl::InvalidArgumentError("a job needs at least one node");
  }
  const int total = c.num_nodes() > 0 ? c.num_nodes() : num_nodes;
  if (num_nodes > total) {
    return absl::OutOfRangeError(
        absl::StrCat("cluster '", c.name(), "' has ", total, " nodes (",
                     static_cast<int64_t>(total) * c.gpus_per_node(),
                     " GPUs); the job needs ", num_nodes));
  }
  const int per_leaf = std::max(1, c.network().nodes_per_leaf());
  const int per_pod = std::max(1, c.network().leaves_per_pod());

  // Describe every node; classes are keyed by (GPU, NIC rate, NIC type).
  std::vector<NodeInfo> all(total);
  std::map<std::tuple<std::string, double, int>, int> class_of;
  std::vector<int> class_size;
  for (int i = 0; i < total; ++i) {
    const GpuType* gpu = &c.gpu();
    const auto* nics = &c.nics();
    for (const NodeOverride& o : c.overrides()) {
      if (i >= o.first_node() && i < o.first_node() + o.num_nodes()) {
        if (o.has_gpu()) gpu = &o.gpu();
        if (o.nics_size() > 0) nics = &o.nics();
      }
    }
    auto [rate, type] = NicSummary(*nics, c.gpus_per_node());
    NodeInfo& n = all[i];
    n.index = i;
    n.gpu = gpu;
    n.nic_type = type;
    n.nic_gbytes_per_gpu = rate;
    n.leaf = i / per_leaf;
    n.pod = n.leaf / per_pod;
    auto key = std::make_tuple(gpu->name(), rate, static_cast<int>(type));
    auto [it, inserted] =
        class_of.emplace(key, static_cast<int>(class_size.size()));
    if (inserted) class_size.push_back(0);
    n.node_class = it->second;
    ++class_size[n.node_class];
  }
  if (class_size.size() == 1) {
    all.resize(num_nodes);
    return all;
  }
  // Largest-remainder apportionment of num_nodes over the classes.
  const int k = static_cast<int>(class_size.size());
  std::vector<int> take(k);
  std::vector<std::pair<double, int>> remainders;
  int given = 0;
  for (int j = 0; j < k; ++j) {
    double exact = static_cast<double>(num_nodes) * class_size[j] / total;
    take[j] = static_cast<int>(std::floor(exact));
    given += take[j];
    remainders.push_back({exact - take[j], -j});
  }
  std::sort(remainders.rbegin(), remainders.rend());
  for (int r = 0; given < num_nodes; ++r, ++given)
    ++take[-remainders[r].second];
  std::vector<NodeInfo> out;
  for (int j = 0; j < k; ++j) {
    for (const NodeInfo& n : all) {
      if (take[j] == 0) break;
      if (n.node_class == j) {
        out.push_back(n);
        --take[j];
      }
    }
  }
  return out;
}

}  // namespace strata::topology
