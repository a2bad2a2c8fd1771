// A job record without its per-node and per-rank lists (JobInfo.nodes,
// node_info, ranks, and the plan's placement ranks and groups): what
// /metrics and other per-job summaries read, at a cost that does not grow
// with the job's size. A 16,384-rank record is about 2 MB; copying it
// whole for every /metrics snapshot held the coordinator's event loop for
// tens of milliseconds (docs/results.md "Coordinator at scale"). Pure.
#pragma once

#include "proto/control.pb.h"

namespace strata::coordinator {

// Every field of `job` but the lists above; the plan keeps its sizes,
// predictions, layers and stages.
control::JobInfo JobSummary(const control::JobInfo& job);

}  // namespace strata::coordinator
