// Megatron-core's pipeline splits (docs/planner.md "Layer split"): which
// transformer layers each pipeline stage holds when the split is pinned
// (`--fix first=,last=`, `embedding_stage=1`, `loss_stage=1`,
// `layout=`), and the layout string that says any split to Megatron-LM
// (`--pipeline-model-parallel-layout`).
//
// Rules (megatron/core/transformer/transformer_config.py and
// pipeline_parallel_layer_layout.py, as of 2026):
//   - first/last: each > 0 and divisible by vpp; the middle p - 2 (or
//     p - 1) stages share the rest evenly, each a multiple of vpp;
//   - embedding/loss in the split: l + 1 (+ 1) layers divide by p, and each
//     stage's share by vpp; the first (last) stage holds one transformer
//     layer less;
//   - a layout string: p x vpp virtual stages separated by '|', 'E'
//     (embedding) first, 'L' (loss) last, once each, l 't' and
//     mtp_num_layers 'm' after every 't', "(..)*n" and "x*n" repeat,
//     commas are cosmetic. strata runs the MTP block on the last stage.
// The first three cannot be combined with each other (Megatron refuses
// the combination too).
#pragma once

#include <string>
#include <vector>

#include "common/status.h"
#include "proto/job.pb.h"
#include "proto/model.pb.h"

namespace strata::planner {

// The pinned split of `model` over p stages with v virtual stages each:
// layers per stage, or an empty vector when `fix` pins no split.
// InvalidArgument naming the Megatron rule that fails.
StatusOr<std::vector<int>> PinnedStageLayers(const PlanConstraints& fix,
                                             const ModelSpec& model, int p,
                                             int v);

// Virtual stages per pipeline rank a layout string gives for p stages
// (its '|'-separated parts / p); InvalidArgument when the parts do not
// divide by p or the string does not parse.
StatusOr<int> LayoutVpp(const std::string& layout, int p);

// The layout string of per-stage layers `layers` (p stages) with v virtual
// stages each and `mtp` multi-token-prediction layers on the last stage:
// each stage's layers spread over its v chunks (the first stage's extra
// layers on its later chunks, so the embedding may stand alone, the last
// stage's on its earlier ones, so the loss may), runs of equal parts
// written "(..|)*n". Precondition: every chunk can be formed (layers[i] >=
// v - 1 on the first and last stage, >= v elsewhere, or fewer when p = 1).
std::string LayoutString(const std::vector<int>& layers, int v, int mtp);

// Fewest transformer layers a stage may hold with v virtual stages: one
// per virtual stage, except that the first (last) stage of a pipeline may
// give one of its virtual stages to the embedding (the loss) alone, as
// Megatron's account_for_*_in_pipeline_split and layouts do.
inline int MinStageLayers(int v, int p, bool first, bool last) {
  if (p == 1) return 1;
  const int min = v - (first ? 1 : 0) - (last ? 1 : 0);
  return min < 1 ? 1 : min;
}

}  // namespace strata::planner
