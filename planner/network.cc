#include "planner/network.h"

#include <algorithm>

namespace strata::planner {
namespace {

double Efficiency(Nic::Type type) {
  switch (type) {
    case Nic::ib:
      return kIbEfficiency;
    case Nic::roce:
      return kRoceEfficiency;
    default:
      return kEthernetEfficiency;
  }
}

}  // namespace

Network::Network(const ClusterSpec& cluster,
                 std::vector<topology::NodeInfo> nodes)
    : gpus_per_node_(cluster.gpus_per_node()),
      intra_gbps_(cluster.intra_node_gbps() * kNvlinkEfficiency),
      intra_latency_s_(cluster.intra_node_latency_s() > 0
                           ? cluster.intra_node_latency_s()
                           : kNvlinkLatency),
      oversubscription_(std::max(1.0, cluster.network().oversubscription())),
      pod_oversubscription_(
          std::max(1.0, cluster.network().pod_oversubscription())),
      nodes_per_leaf_(std::max(1, cluster.network().nodes_per_leaf())),
      leaves_per_pod_(std::max(1, cluster.network().leaves_per_pod())),
      cluster_nodes_(cluster.num_nodes()),
      nodes_(std::move(nodes)),
      host_(cluster.host()),
      calibration_(cluster.calibration()),
      cpu_cores_per_node_(std::max(0, cluster.cpu_cores_per_node())) {
  homogeneous_ = true;
  identical_ = true;
  for (const auto& n : nodes_) {
    homogeneous_ &= n.node_class == 0;
    const topology::NodeInfo& n0 = nodes_.front();
    identical_ &= n.node_class == n0.node_class && n.gpu == n0.gpu &&
                  n.nic_type == n0.nic_type &&
                  n.nic_gbytes_per_gpu == n0.nic_gbytes_per_gpu;
  }
}

int Network::PhysicalNode(int64_t j, int stage_nodes) const {
  const int leaf = nodes_per_leaf_;
  if (!homogeneous_ || stage_nodes <= 0 || stage_nodes >= leaf ||
      leaf % stage_nodes == 0) {
    return nodes_[j].index;
  }
  const int used = leaf / stage_nodes * stage_nodes;  // whole stages per leaf
  const int64_t last = static_cast<int64_t>(nodes_.size()) - 1;
  const int64_t last_physical = last / used * leaf + last % used;
  if (cluster_nodes_ > 0 && last_physical >= cluster_nodes_) {
    return nodes_[j].index;  // no spare nodes: contiguous
  }
  return static_cast<int>(j / used * leaf + j % used);
}

std::pair<int64_t, int64_t> Network::NodeSpan(int64_t first_rank,
                                              int64_t span) const {
  return {first_rank / gpus_per_node_,
          std::min<int64_t>((first_rank + span - 1) / gpus_per_node_,
                            static_cast<int64_t>(nodes_.size()) - 1)};
}

double Network::Oversubscription(int64_t a, int64_t b, int stage_nodes) const {
  const int leaf_a = PhysicalNode(a, stage_nodes) / nodes_per_leaf_;
  const int leaf_b = PhysicalNode(b, stage_nodes) / nodes_per_leaf_;
  if (leaf_a / leaves_per_pod_ != leaf_b / leaves_per_pod_) {
    return oversubscription_ * pod_oversubscription_;
  }
  return leaf_a != leaf_b ? oversubscription_ : 1;
}

GroupLink Network::Link(int64_t first_rank, int64_t span, int members_per_node,
                        int group_size, int stage_nodes) const {
  GroupLink link;
  link.intra_gbps = intra_gbps_;
  link.intra_latency_s = intra_latency_s_;
  const auto [a, b] = NodeSpan(first_rank, span);
  link.members_per_node = std::max(1, std::min(members_per_node, group_size));
  link.nodes = std::max(1, group_size / link.members_per_node);
  const topology::NodeInfo& first = nodes_[a];
  const topology::NodeInfo& last = nodes_[b];
  double rate = first.nic_gbytes_per_gpu;
  link.nic_type = first.nic_type;
  link.gpu = first.gpu;
  // Nodes are ordered by class, so scanning class changes is enough; the
  // loop visits each node at most once and stops early for equal classes.
  if (first.node_class != last.node_class) {
    for (int64_t n = a; n <= b; ++n) {
      rate = std::min(rate, nodes_[n].nic_gbytes_per_gpu);
      if (nodes_[n].nic_type != link.nic_type) link.mixed_nic_types = true;
      if (nodes_[n].gpu->peak_bf16_tflops() < link.gpu->peak_bf16_tflops()) {
        link.gpu = nodes_[n].gpu;
      }
    }
  }
  link.min_peak_tflops = link.gpu->peak_bf16_tflops();
  // RDMA does not cross fabrics of different types (Holmes, arXiv
  // 2312.03549): such traffic takes the Ethernet/TCP path.
  const double eff =
      link.mixed_nic_types ? kEthernetEfficiency : Efficiency(link.nic_type);
  link.nic_gbps = rate * eff;
  link.inter_gbps = link.nic_gbps / Oversubscription(a, b, stage_nodes);
  return link;
}

double Network::AllReduce(double bytes, const GroupLink& l) {
  return 2 * ReduceScatter(bytes, l);
}

double Network::ReduceScatter(double bytes, const GroupLink& l) {
  const double r = l.members_per_node, k = l.nodes;
  double t = 0;
  if (r > 1)
    t += (r - 1) / r * bytes / (l.intra_gbps * 1e9) +
         (r - 1) * l.intra_latency_s;
  if (k > 1) {
    // After the intra-node phase each GPU owns bytes/r and runs a ring with
    // its same-local-rank peers on k nodes, on its own NIC share.
    t += (k - 1) / k * bytes / r / (l.inter_gbps * 1e9) + (k - 1) * kNicLatency;
  }
  return t;
}

double Network::IntraAllReduce(double bytes, int n) const {
  if (n <= 1) return 0;
  return 2.0 * (n - 1) / n * bytes / (intra_gbps_ * 1e9) +
         2.0 * (n - 1) * intra_latency_s_;
}

double Network::P2P(double bytes, bool crosses_nodes,
                    const GroupLink& link) const {
  if (!crosses_nodes) return bytes / (intra_gbps_ * 1e9) + intra_latency_s_;
  return bytes / (link.inter_gbps * 1e9) + kNicLatency;
}

}  // namespace strata::planner
