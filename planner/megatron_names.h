// Model files written with Megatron-core's names (docs/planner.md "Model
// files with Megatron-core names").
//
// A model file may use the field names of Megatron-core's TransformerConfig
// and MLATransformerConfig (megatron/core/transformer/transformer_config.py)
// and of the GPT model providers that Megatron-Bridge and NeMo recipes hold
// (vocab_size, seq_length, share_embeddings_and_output_weights, ...).
// TranslateMegatronNames maps every such field onto ModelSpec:
//   - a ModelSpec field keeps its name;
//   - a Megatron-core name for a ModelSpec meaning is renamed, its value
//     converted (num_moe_experts -> num_experts, normalization: RMSNorm ->
//     norm: rmsnorm, gated_linear_unit -> activation, a moe_layer_freq list
//     -> moe_num_dense_layers + moe_layer_freq, ...); giving both names with
//     different values is refused;
//   - a field that changes nothing the planner predicts (initialisation,
//     epsilons, RoPE scaling, router loss coefficients, fused kernels the
//     cost model already assumes) is accepted and dropped;
//   - a parallel-layout field is refused naming the `--fix` key that sets
//     it, a field the cost model cannot represent (sliding windows) is
//     refused saying so, and any other name is refused naming the nearest
//     known one.
#pragma once

#include <string>
#include <vector>

#include "common/status.h"

namespace strata::planner {

// Returns the text ParseConfig should read for the model file `text`
// (`source` names it in errors, as "source:line:column: field 'x': ...").
// The text is returned unchanged when it uses only ModelSpec names, or when
// it is not a YAML/JSON mapping (ParseConfig then reports the problem).
// InvalidArgument for a refused field or contradictory values.
StatusOr<std::string> TranslateMegatronNames(const std::string& text,
                                             const std::string& source);

// The name among ModelSpec's fields and the accepted Megatron-core names
// with the smallest edit distance to `name` (for error messages).
std::string NearestModelField(const std::string& name);

// The entry of `candidates` with the smallest edit distance to `name` (the
// alphabetically first among equals; empty when there is none).
std::string NearestName(const std::string& name,
                        const std::vector<std::string>& candidates);

}  // namespace strata::planner
