// Why a request has no runnable layout, rule by rule, and the checks of a
// pinned pipeline split (docs/planner.md "Search", "Layer split"). Private
// to the search (search.cc).
#pragma once

#include "common/status.h"
#include "planner/search.h"

namespace strata::planner::search_internal {

// --fix first/last, embedding_stage/loss_stage and layout: they need a
// pinned pp, a layout's virtual stages must agree with a pinned vpp, and
// with vpp pinned (or given by the layout) the split must follow
// Megatron's rules (PinnedStageLayers). InvalidArgument naming the rule.
Status CheckPinnedSplit(const PlanRequest& req);

// The error when no candidate exists: the first rule the pinned values
// break (tp against the GPUs per node and the heads, the GPU count, the
// batch, the layers per virtual stage, the interleaved schedule's
// micro-batches, the experts), with its numbers; or the list of rules when
// no single pinned value explains it.
Status NoLayoutError(const PlanRequest& req);

}  // namespace strata::planner::search_internal
