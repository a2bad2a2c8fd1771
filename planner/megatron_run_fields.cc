#include "planner/megatron_run_fields.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "planner/megatron_names.h"

namespace strata::planner {
namespace {

const std::vector<std::string> kDispatchers = {"alltoall", "allgather", "flex"};
const std::vector<std::string> kFlexBackends = {"deepep", "hybridep"};
const std::vector<std::string> kGraphImpls = {"none", "local",
                                              "transformer_engine"};
// Megatron-core transformer/enums.py, CudaGraphScope (CudaGraphModule in
// later releases): the scopes that leave the expert block's host work and
// the dispatcher's synchronisation outside the graph. "full" is the
// deprecated spelling of the empty list (whole layers, dense ones here:
// Megatron-core itself refuses whole-layer graphs of dropless MoE layers).
const std::vector<std::string> kGraphScopes = {
    "attn", "mlp", "moe_router", "moe_preprocess", "mamba", "full"};

std::string OneOf(const std::vector<std::string>& values) {
  return absl::StrCat("expected one of ", absl::StrJoin(values, ", "));
}

bool In(const std::vector<std::string>& values, const std::string& v) {
  for (const std::string& x : values) {
    if (x == v) return true;
  }
  return false;
}

std::optional<std::string> Choice(const YAML::Node& value,
                                  const std::vector<std::string>& values) {
  if (value.IsScalar() && In(values, value.Scalar())) return std::nullopt;
  return OneOf(values);
}

std::optional<std::string> GraphScopeProblem(const std::string& scope) {
  if (In(kGraphScopes, scope)) return std::nullopt;
  if (scope == "moe") {
    return std::string(
        "the 'moe' CUDA-graph scope captures drop-and-pad MoE layers only; "
        "strata models dropless MoE (use moe_router and moe_preprocess)");
  }
  if (scope == "full_iteration" || scope == "full_iteration_inference") {
    return std::string(
        "a whole-iteration CUDA graph takes the host out of the step, which "
        "strata's cost model does not represent (docs/planner.md)");
  }
  return absl::StrCat("unknown CUDA-graph scope '", scope, "' (nearest: '",
                      NearestName(scope, kGraphScopes), "'; ",
                      OneOf(kGraphScopes), ")");
}

std::optional<std::string> Overlap(const YAML::Node& value) {
  bool on = false;
  if (!value.IsScalar() || !YAML::convert<bool>::decode(value, on)) {
    return std::string("expected true or false");
  }
  if (!on) return std::nullopt;
  return std::string(
      "true turns on Megatron-core's combined-1F1B expert-parallel overlap, "
      "which strata's cost model does not represent (docs/planner.md "
      "\"Mixture-of-Experts\"); remove it to plan without the overlap");
}

}  // namespace

const std::vector<std::string>& MegatronRunFieldNames() {
  static const auto* names = new std::vector<std::string>{
      "moe_token_dispatcher_type",
      "moe_flex_dispatcher_backend",
      "moe_enable_deepep",
      "cuda_graph_impl",
      "cuda_graph_scope",
      "cuda_graph_modules",
      "overlap_moe_expert_parallel_comm",
      "delay_wgrad_compute",
  };
  return *names;
}

bool IsMegatronRunField(const std::string& name) {
  return In(MegatronRunFieldNames(), name);
}

std::optional<std::string> MegatronRunFieldProblem(const std::string& name,
                                                   const YAML::Node& value) {
  if (name == "moe_token_dispatcher_type") return Choice(value, kDispatchers);
  if (name == "moe_flex_dispatcher_backend") {
    if (value.IsNull()) return std::nullopt;
    return Choice(value, kFlexBackends);
  }
  if (name == "moe_enable_deepep") {
    bool b = false;
    if (value.IsScalar() && YAML::convert<bool>::decode(value, b)) {
      return std::nullopt;
    }
    return std::string("expected true or false");
  }
  if (name == "cuda_graph_impl") {
    if (value.IsScalar() && value.Scalar() == "full_iteration") {
      return GraphScopeProblem("full_iteration");
    }
    return Choice(value, kGraphImpls);
  }
  if (name == "cuda_graph_scope" || name == "cuda_graph_modules") {
    // One scope or a list of them; null or the empty list: whole layers.
    if (value.IsNull()) return std::nullopt;
    if (value.IsScalar()) return GraphScopeProblem(value.Scalar());
    if (!value.IsSequence()) {
      return std::string("expected a scope or a list of scopes");
    }
    for (const auto& e : value) {
      if (!e.IsScalar()) return std::string("expected a list of scope names");
      if (auto p = GraphScopeProblem(e.Scalar())) return p;
    }
    return std::nullopt;
  }
  if (name == "overlap_moe_expert_parallel_comm" ||
      name == "delay_wgrad_compute") {
    return Overlap(value);
  }
  return absl::StrCat("internal: '", name, "' is not a run field");
}

}  // namespace strata::planner
