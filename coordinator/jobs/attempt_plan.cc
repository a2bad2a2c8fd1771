#include "coordinator/jobs/attempt_plan.h"

#include <algorithm>

#include <google/protobuf/field_mask.pb.h>
#include <google/protobuf/util/field_mask_util.h>

#include "absl/strings/str_cat.h"
#include "common/config.h"
#include "placement/layout.h"
#include "planner/calibrate.h"
#include "planner/candidate.h"
#include "planner/model.h"
#include "planner/network.h"
#include "planner/search.h"
#include "topology/cluster.h"

namespace strata::coordinator {
namespace {

// Used when sysfs has no speed (veth, loopback, virtual NICs).
constexpr double kUnknownNicGbps = 10.0;

}  // namespace

int RanksPerNode(const JobSpec& spec, const control::NodeProbe& probe) {
  if (spec.launch().ranks_per_node() > 0) return spec.launch().ranks_per_node();
  return std::max(1, probe.gpus());
}

ClusterSpec ClusterFromProbes(
    const std::vector<control::WorkerInfo>& nodes, int ranks_per_node,
    const google::protobuf::Map<std::string, double>& node_speed) {
  ClusterSpec c;
  c.set_name("probed");
  c.set_source("worker probes");
  c.set_num_nodes(static_cast<int>(nodes.size()));
  c.set_gpus_per_node(ranks_per_node);
  // The slowest node bounds a synchronous job, so take minima.
  double gflops = 0, copy_gbps = 0, memory = 0, nic_gbps = 0;
  double half_dim = 0;  // the largest measured: the slowest size curve
  int cores = 0;        // the fewest
  double handoff_s = 0, busy_handoff_s = 0;  // the slowest
  int64_t gpu_memory = 0;
  std::string gpu_name;
  for (size_t i = 0; i < nodes.size(); ++i) {
    const control::NodeProbe& p = nodes[i].probe();
    auto take_min = [&](double v, double* acc) {
      if (v > 0) *acc = (i == 0 || *acc == 0) ? v : std::min(*acc, v);
    };
    // The size curve's large-matrix rate when the probe fitted one
    // (gemm_peak_gflops), else the 512^3 rate of older workers.
    take_min(p.gemm_peak_gflops() > 0 ? p.gemm_peak_gflops() : p.cpu_gflops(),
             &gflops);
    half_dim = std::max(half_dim, p.gemm_half_dim());
    handoff_s = std::max(handoff_s, p.handoff_latency_s());
    busy_handoff_s = std::max(busy_handoff_s, p.busy_handoff_latency_s());
    if (p.cpu_cores() > 0) {
      cores = cores == 0 ? p.cpu_cores() : std::min(cores, p.cpu_cores());
    }
    take_min(p.copy_gbps(), &copy_gbps);
    take_min(static_cast<double>(p.memory_bytes()), &memory);
    double best_nic = 0;
    for (const auto& n : p.nic_details())
      best_nic = std::max(best_nic, n.gbps());
    if (p.peer_gbps() > 0) best_nic = p.peer_gbps();  // measured beats nominal
    take_min(best_nic > 0 ? best_nic : kUnknownNicGbps, &nic_gbps);
    if (p.gpu_details_size() > 0) {
      gpu_name = p.gpu_details(0).name();
      gpu_memory = p.gpu_details(0).memory_bytes();
    }
  }
  GpuType* gpu = c.mutable_gpu();
  if (!gpu_name.empty()) {
    gpu->set_name(gpu_name);
    gpu->set_memory_gib(static_cast<double>(gpu_memory) / (1ull << 30));
  } else {
    gpu->set_name("cpu-core");
    gpu->set_memory_gib(memory / ranks_per_node / (1ull << 30));
  }
  // Peak per device in TFLOP/s.
  gpu->set_peak_bf16_tflops(std::max(gflops, 1.0) / 1000.0);
  gpu->set_gemm_efficiency(1.0);
  if (gpu_name.empty()) {
    // A CPU rank runs at one core's measured rates: the SGEMM size curve,
    // and memory-bound kernels and the optimizer at the copy rate. The
    // ranks share the node's cores (cpu_cores_per_node): the cost model
    // bounds a step by the node's work over its cores (docs/planner.md
    // "Calibration").
    gpu->set_gemm_half_dim(half_dim);
    gpu->set_hbm_gbps(std::max(copy_gbps, 1.0));
    // Transfers between ranks are copies through shared memory, of fp32
    // tensors where the cost model counts bf16 bytes
    // (kCpuBytesPerModelByte); the network model multiplies
    // intra_node_gbps by the NVLink efficiency, undone here.
    c.set_intra_node_gbps(std::max(copy_gbps, 1.0) /
                          planner::kCpuBytesPerModelByte /
                          planner::kNvlinkEfficiency);
    c.set_cpu_cores_per_node(std::max(1, cores));
    // A collective step or send waits for the peer thread to wake, and
    // for a core when the ranks outnumber the cores.
    c.set_intra_node_latency_s(planner::RanksOutnumberCores(c) ? busy_handoff_s
                                                               : handoff_s);
  } else {
    gpu->set_hbm_gbps(std::max(copy_gbps, 1.0));
    c.set_intra_node_gbps(std::max(copy_gbps, 1.0) * 8);
  }
  Nic* nic = c.add_nics();
  nic->set_count(1);
  nic->set_gbps(nic_gbps);
  nic->set_type(Nic::ethernet);
  c.mutable_network()->set_nodes_per_leaf(std::max<int>(1, nodes.size()));
  c.mutable_network()->set_leaves_per_pod(1);
  c.mutable_network()->set_oversubscription(1);
  c.mutable_network()->set_pod_oversubscription(1);
  for (size_t i = 0; i < nodes.size(); ++i) {
    auto it = node_speed.find(nodes[i].node_name());
    if (it == node_speed.end() || !(it->second > 0 && it->second < 1)) continue;
    NodeOverride* o = c.add_overrides();
    o->set_first_node(static_cast<int>(i));
    o->set_num_nodes(1);
    *o->mutable_gpu() = c.gpu();
    o->mutable_gpu()->set_name(
        absl::StrCat(c.gpu().name(), " at ", it->second, "x"));
    o->mutable_gpu()->set_peak_bf16_tflops(c.gpu().peak_bf16_tflops() *
                                           it->second);
    o->mutable_gpu()->set_hbm_gbps(c.gpu().hbm_gbps() * it->second);
  }
  return c;
}

std::string CalibrationKey(const std::vector<control::WorkerInfo>& nodes) {
  std::string device = "cpu-core";
  if (!nodes.empty() && nodes[0].probe().gpu_details_size() > 0) {
    device = nodes[0].probe().gpu_details(0).name();
  }
  return "calibration/" + device;
}

void ScaleCompute(double compute_scale, const std::string& source,
                  ClusterSpec* c) {
  if (!(compute_scale > 0) || compute_scale == 1.0) return;
  auto scale = [&](GpuType* g) {
    g->set_peak_bf16_tflops(g->peak_bf16_tflops() / compute_scale);
    g->set_hbm_gbps(g->hbm_gbps() / compute_scale);
  };
  scale(c->mutable_gpu());
  for (NodeOverride& o : *c->mutable_overrides()) {
    if (o.has_gpu()) scale(o.mutable_gpu());
  }
  c->mutable_calibration()->set_source(
      absl::StrCat(source, ": compute x", compute_scale));
}

StatusOr<Plan> PlanAttempt(
    const JobSpec& spec, const std::vector<control::WorkerInfo>& nodes,
    const google::protobuf::Map<std::string, double>& node_speed,
    double compute_scale) {
  if (nodes.empty()) return absl::InvalidArgumentError("no nodes to plan on");
  const int rpn = RanksPerNode(spec, nodes[0].probe());
  const int64_t world = static_cast<int64_t>(rpn) * nodes.size();
  ClusterSpec cluster = ClusterFromProbes(nodes, rpn, node_speed);
  ScaleCompute(compute_scale, "coordinator step reports", &cluster);
  RETURN_IF_ERROR(topology::ValidateCluster(cluster));

  if (!spec.launch().model().empty()) {
    planner::PlanRequest req;
    ASSIGN_OR_RETURN(req.model, planner::LoadModel(spec.launch().model()));
    req.cluster = cluster;
    req.job = spec;
    if (req.job.global_batch() == 0) req.job.set_global_batch(world);
    req.gpus = world;
    req.top_k = 1;
    ASSIGN_OR_RETURN(PlanReport report, planner::PlanJob(req));
    return report.plans(0);
  }

  const PlanConstraints& k = spec.constraints();
  placement::Sizes c;
  c.tp = k.has_tp() ? k.tp() : 1;
  c.pp = k.has_pp() ? k.pp() : 1;
  c.cp = k.has_cp() ? k.cp() : 1;
  const int dp = placement::DataParallelSize(world, c.tp, c.pp, c.cp);
  if (dp == 0 || (k.has_dp() && k.dp() != dp)) {
    return absl::InvalidArgumentError(
        absl::StrCat("job asks for tp=", c.tp, " pp=", c.pp, " cp=", c.cp,
                     k.has_dp() ? absl::StrCat(" dp=", k.dp()) : std::string(),
                     " but the attempt has ", world, " ranks (", nodes.size(),
                     " nodes x ", rpn, ")"));
  }
  c.dp = dp;
  // The nodes in the order topology::SelectNodes gives them (by class: a
  // node slowed by node_speed is a class of its own), each node's ranks a
  // contiguous block; every probed node has the one NIC ClusterFromProbes
  // describes.
  ASSIGN_OR_RETURN(auto infos, topology::SelectNodes(
                                   cluster, static_cast<int>(nodes.size())));
  std::vector<int> node_of_rank(world);
  for (int64_t r = 0; r < world; ++r) node_of_rank[r] = infos[r / rpn].index;
  ASSIGN_OR_RETURN(
      Plan plan, placement::FixedPlan(c, node_of_rank,
                                      topology::NicTypeName(infos[0].nic_type)));
  plan.set_global_batch(spec.global_batch());
  return plan;
}

std::string PlanFileJson(const Plan& plan) {
  // Copies all but the two lists, rather than copying them to clear them
  // (16,384 rank entries and their groups at 16,384 ranks).
  static const google::protobuf::FieldMask* mask = [] {
    using google::protobuf::util::FieldMaskUtil;
    google::protobuf::FieldMask lists;
    lists.add_paths("placement.ranks");
    lists.add_paths("placement.groups");
    auto* out = new google::protobuf::FieldMask;
    FieldMaskUtil::Subtract<Plan>(FieldMaskUtil::GetFieldMaskForAllFields<Plan>(),
                                  lists, out);
    return out;
  }();
  Plan small;
  google::protobuf::util::FieldMaskUtil::MergeMessageTo(
      plan, *mask, google::protobuf::util::FieldMaskUtil::MergeOptions(),
      &small);
  return MessageToJson(small);
}

}  // namespace strata::coordinator
