// CostModel's private parts shared by its source files (cost_model.cc: the
// per-candidate and per-stage steps; layer_cost.cc: one layer's time and
// memory; core_sharing.cc: CPU ranks sharing cores). Not a public header:
// only those three and planner/dualpipe.h include it.
#pragma once

#include <algorithm>
#include <array>
#include <cmath>

#include "planner/cost_model.h"

namespace strata::planner {
namespace cost_internal {

inline constexpr double kGiB = 1024.0 * 1024.0 * 1024.0;

// Communication hidden behind `window` seconds of compute still slows that
// compute: NCCL kernels occupy SMs and HBM bandwidth while they run.
inline double Exposed(double comm, double window) {
  return std::max(0.0, comm - window) + kOverlapTax * std::min(comm, window);
}

}  // namespace cost_internal

// Quantities of the candidate that every step of Evaluate reads.
struct CostModel::Shape {
  int p = 1, v = 1, l = 1;  // stages, virtual stages, layers
  int gpn = 1;              // GPUs per node
  int64_t stage_ranks = 1;  // t c d ranks per pipeline stage
  double m = 1;             // micro-batches per step
  double steps = 1;         // m + (p-1)/v micro-batch slots per stage
  double dshard = 1;        // D = d c: gradients reduce over these ranks
  double eshard = 1;        // experts' data-parallel size t c d / (ep etp)
  bool sharded_optimizer = false;
  double grad_bytes = 2;  // per parameter: bf16, fp32 under distopt
  int dp_per_node = 1;    // DP x CP members of a stage per node
  int stage_nodes = 1;    // nodes per pipeline stage
};

struct CostModel::LayerCost {
  double fwd_s = 0;        // forward of one layer for one micro-batch
  double bwd_extra_s = 0;  // backward beyond 2x forward (flash recompute)
  double recompute_s = 0;  // extra forward work of the recompute mode
  double tp_s = 0;         // tensor-parallel collectives, fwd + bwd (+ rc)
  double cp_s = 0;         // exposed context-parallel ring traffic
  double act_bytes = 0;    // activations kept per layer per micro-batch
  double work_bytes = 0;   // working set of one recomputed layer
  double p2p_bytes = 0;    // stage-boundary tensor
  double logits_s = 0;     // output layer fwd + bwd, one micro-batch
  double logits_bytes = 0;
  double a2a_s = 0;      // MoE all-to-all (and ETP collectives), exposed
  double a2a_inter = 0;  // share of all-to-all bytes that leave the node
  // MoE models: what Megatron-core's module recompute (--recompute-modules
  // moe_act layernorm) drops per layer: the experts' activation-function
  // outputs and the two norms' outputs.
  double module_bytes = 0;
  double module_s = 0;  // their rerun: memory-bound, kElementwisePasses
  // MoE host time the GPU waits for (moe_host.h), mean layer, one
  // micro-batch: the expert block's forward, and the layer's backward.
  double moe_host_fwd_s = 0;
  double moe_host_bwd_s = 0;
  // Forward, backward and recompute of the layer: the window its
  // communication can hide behind.
  double Compute() const { return 3 * fwd_s + bwd_extra_s + recompute_s; }
  double Total() const { return Compute() + tp_s + cp_s + a2a_s; }
};

// Stages on equal links and GPUs, in the same position (first, last), cost
// the same per layer. `alpha` and `beta` fit the stage time as a line in
// its layer count; `layers` is what the split gives each of the `count`
// stages of the class.
struct CostModel::StageClass {
  GroupLink link;
  bool first = false, last = false;
  LayerCost lc;
  double alpha = 0, beta = 0;  // time(L) ~ alpha L + beta
  int count = 0, layers = 0;
  int trimmed = 0;  // its first `trimmed` stages hold layers - 1
  int min_layers = 1;  // MinStageLayers of its position and v
  int max_layers = 1 << 30;  // the most that fit in its GPUs' memory
};

struct CostModel::StageClasses {
  StageClass at[kMaxStageClasses];
  int size = 0;
};

struct CostModel::StageLayout {
  // Key: what ClassifyStages reads of a candidate.
  int p = -1, dp_per_node = 0, group = 0, stage_nodes = 0;
  int64_t stage_ranks = 0;
  StageClasses classes;          // links, first/last and counts (no costs)
  std::vector<int> stage_class;  // per stage
  std::vector<std::vector<int>> positions;  // per class: its stages, ascending
};

// What Layer() reads of a candidate and its GPU.
struct LayerKey {
  const GpuType* gpu = nullptr;
  int tp = 0, cp = 0, dp = 0, ep = 0, etp = 0, micro_batch = 0, recompute = -1;
  bool sequence_parallel = false;
  bool operator==(const LayerKey&) const = default;
};

// Replaced round-robin.
struct CostModel::LayerCache {
  std::array<std::pair<LayerKey, LayerCost>, 8> entries;
  size_t next = 0;
};

struct CostModel::StageCost {
  double time_s = 0;
  double mb_s = 0;  // one micro-batch through this stage
  double pipeline_s = 0;
  double dp_exposed_s = 0, dp_total_s = 0, optimizer_s = 0;
  double offload_exposed_s = 0, offload_total_s = 0;
  double weights = 0, grads = 0, optim = 0, acts = 0, logits = 0, z3 = 0;
  double fp8 = 0;      // FP8 weight copies and amax histories
  double experts = 0;  // of weights + grads + optim: the routed experts'
  double host_bytes = 0, nvme_bytes = 0;  // per node, under offload
  double Memory(double reserve) const {
    return weights + grads + optim + acts + logits + z3 + fp8 + reserve;
  }
};

// Parameters on one GPU of a stage: the dense ones (attention, norms,
// dense and shared MLPs, router, embeddings) split by TP and replicated
// over D = d c, and the routed experts split by ep x etp and replicated
// over t c d / (ep etp) (Megatron-core MoE parallel folding).
struct CostModel::StagePsi {
  double dense = 0;
  double expert = 0;
  double layer_dense = 0;  // of dense: the layers' weights (FP8 only)
};

}  // namespace strata::planner
