// Per-node speed factors of a job (JobSpec.node_speed; `strata plan
// --node-speed`): a slow node, or a straggler the fault detector measured.
#pragma once

#include "common/status.h"
#include "google/protobuf/repeated_ptr_field.h"
#include "proto/job.pb.h"
#include "proto/topology.pb.h"

namespace strata::planner {

// Gives every node named in `speeds` a single-node override whose GPU has
// the node's FLOP rate and memory bandwidth times its speed (appended after
// the cluster's own overrides, so it wins), named "<gpu> at <speed>x" so it
// forms its own node class: the layer split then gives its pipeline stage
// fewer layers (more when speed > 1). A cluster without num_nodes is fixed
// at `job_nodes` nodes. InvalidArgument naming the entry when a node lies
// outside the cluster.
Status ApplyNodeSpeeds(
    const google::protobuf::RepeatedPtrField<NodeSpeed>& speeds, int job_nodes,
    ClusterSpec* cluster);

}  // namespace strata::planner
