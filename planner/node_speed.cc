#include "planner/node_speed.h"

#include "absl/strings/str_cat.h"

namespace strata::planner {

Status ApplyNodeSpeeds(
    const google::protobuf::RepeatedPtrField<NodeSpeed>& speeds, int job_nodes,
    ClusterSpec* cluster) {
  if (speeds.empty()) return absl::OkStatus();
  if (!cluster->has_num_nodes()) cluster->set_num_nodes(job_nodes);
  for (int i = 0; i < speeds.size(); ++i) {
    const NodeSpeed& s = speeds[i];
    if (s.node() >= cluster->num_nodes()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "job: field 'node_speed[", i, "].node' = ", s.node(),
          " is outside the cluster's ", cluster->num_nodes(), " nodes"));
    }
    // The node's GPU as the cluster describes it (the last override wins,
    // as in topology::SelectNodes).
    GpuType gpu = cluster->gpu();
    for (const NodeOverride& o : cluster->overrides()) {
      if (o.has_gpu() && s.node() >= o.first_node() &&
          s.node() < o.first_node() + o.num_nodes()) {
        gpu = o.gpu();
      }
    }
    NodeOverride* o = cluster->add_overrides();
    o->set_first_node(s.node());
    o->set_num_nodes(1);
    gpu.set_name(absl::StrCat(gpu.name(), " at ", s.speed(), "x"));
    gpu.set_peak_bf16_tflops(gpu.peak_bf16_tflops() * s.speed());
    gpu.set_hbm_gbps(gpu.hbm_gbps() * s.speed());
    *o->mutable_gpu() = gpu;
  }
  return absl::OkStatus();
}

}  // namespace strata::planner
