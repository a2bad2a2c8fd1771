// Megatron-core run settings a recipe's model section carries next to the
// architecture: the MoE token dispatcher, CUDA-graph capture and the
// expert-parallel overlap (docs/planner.md "Model files with Megatron-core
// names", "The host-bound expert block").
//
// Each is checked against the values Megatron-core accepts; a value whose
// effect strata's cost model includes or that does not change what the
// model predicts is accepted (the model file loads, nothing in ModelSpec
// changes); a value whose effect the model cannot represent is refused
// saying so; any other value is refused naming the accepted ones.
//   - moe_token_dispatcher_type (alltoall, allgather, flex) and
//     moe_flex_dispatcher_backend (deepep, hybridep), moe_enable_deepep:
//     every dispatcher is costed as the alltoall one (its all-to-all
//     volume and its host synchronisation), docs/planner.md.
//   - cuda_graph_impl (none, local, transformer_engine) and
//     cuda_graph_scope / cuda_graph_modules (attn, mlp, moe_router,
//     moe_preprocess, mamba; Megatron-core transformer/enums.py,
//     CudaGraphScope): the expert block's per-expert launches and the
//     dispatcher's host synchronisation stay outside these graphs (with
//     moe_preprocess captured, MoEAlltoAllTokenDispatcher moves the copy
//     of the split sizes to "before_ep_alltoall" and still synchronises
//     there), so they leave the prediction unchanged. Refused: the "moe"
//     scope (drop-and-pad MoE layers only; strata models dropless MoE) and
//     whole-iteration graphs (cuda_graph_impl full_iteration, scope
//     full_iteration), which remove the host from the step.
//   - overlap_moe_expert_parallel_comm and delay_wgrad_compute: false is
//     accepted; true is refused (the combined-1F1B overlap is not
//     modelled, docs/planner.md "Mixture-of-Experts").
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "yaml-cpp/yaml.h"

namespace strata::planner {

// True for the names above.
bool IsMegatronRunField(const std::string& name);

// The names above (for the nearest-name search of refusals).
const std::vector<std::string>& MegatronRunFieldNames();

// nullopt when `value` is accepted for run field `name`; otherwise what is
// wrong with it, for an InvalidArgument naming the field.
std::optional<std::string> MegatronRunFieldProblem(const std::string& name,
                                                   const YAML::Node& value);

}  // namespace strata::planner
