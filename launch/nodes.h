// Which ranks of an mpirun job share a node and a host, and the address each
// node's ranks bind (STRATA_NODE_ADDR). Pure functions over what the ranks
// all-gather, so the decision is unit-tested (tests/unit/launch/nodes_test.cc).
#pragma once

#include <string>
#include <vector>

#include "common/status.h"
#include "placement/rank_env.h"

namespace strata::launch {

// What one rank reports about where it runs.
struct RankHost {
  std::string node_name;  // --node-name; empty: the host is the node
  std::string hostname;
  std::string address;  // net::ReachableHostAddress(); empty: none

  // One line-free string for MPI_Allgather, and back.
  std::string Encode() const;
  static RankHost Decode(const std::string& wire);
};

struct JobNodes {
  // Node index of every rank; nodes are numbered in order of their lowest
  // rank.
  std::vector<int> node_of_rank;
  // Per node: its name (--node-name, else the hostname) and the address
  // its ranks bind: 127.0.0.1 when every rank runs on one host, else the
  // node's reachable address.
  std::vector<placement::NodeEndpoint> nodes;
  bool one_host = true;
};

// Ranks with the same --node-name, or without one the same hostname and
// address, share a node; ranks with the same hostname and address share a
// host. InvalidArgument naming the rank and host when the ranks span hosts
// and one has no reachable address, or when ranks of one --node-name run on
// different hosts.
StatusOr<JobNodes> GroupNodes(const std::vector<RankHost>& ranks);

// Whether each node holds one contiguous block of ranks and all blocks have
// the same size (mpirun's default by-slot mapping with equal slots per
// node), the layout strata's runtime needs (placement/layout.h).
bool NodesAreContiguousEqualBlocks(const std::vector<int>& node_of_rank);

}  // namespace strata::launch
