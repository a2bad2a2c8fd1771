#include "planner/megatron_names.h"

#include <algorithm>
#include <map>
#include <optional>
#include <set>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "common/config.h"
#include "planner/megatron_run_fields.h"
#include "proto/model.pb.h"
#include "yaml-cpp/yaml.h"

namespace strata::planner {
namespace {

// Megatron-core names with the same meaning as a ModelSpec field under
// another name (value copied as it is).
const std::map<std::string, std::string>& Renamed() {
  static const auto* m = new std::map<std::string, std::string>{
      {"num_moe_experts", "num_experts"},
      {"moe_expert_capacity_factor", "moe_capacity_factor"},
      {"add_bias_linear", "linear_bias"},
      {"share_embeddings_and_output_weights", "tied_embeddings"},
      // MLATransformerConfig.qk_head_dim: the query/key head size without
      // the rotary part, which ModelSpec calls kv_channels under MLA.
      {"qk_head_dim", "kv_channels"},
  };
  return *m;
}

// Megatron-core names whose value is converted (ConvertField).
const std::set<std::string>& Converted() {
  static const auto* s = new std::set<std::string>{
      "normalization",
      "position_embedding_type",
      "gated_linear_unit",
      "activation_func",
      "hidden_dropout",
      "attention_dropout",
      "multi_latent_attention",
      "fp8",
      "bf16",
      "fp16",
      "moe_layer_freq",
      "moe_router_force_load_balancing",
      "softmax_type",
  };
  return *s;
}

// Fields that change nothing strata predicts: initialisation, epsilons,
// RoPE and YaRN scaling (no parameters, elementwise cost the model already
// charges), router losses and biases (balanced routing is assumed, as the
// published benchmarks force), numerics switches, and fused kernels and
// grouped GEMMs that the cost model already assumes (docs/planner.md).
const std::set<std::string>& Ignored() {
  static const auto* s = new std::set<std::string>{
      "layernorm_epsilon", "layernorm_zero_centered_gamma", "init_method_std",
      "embedding_init_method_std", "apply_query_key_layer_scaling",
      "attention_softmax_in_fp32", "apply_residual_connection_post_layernorm",
      "fp32_residual_connection", "rotary_base", "rotary_percent",
      "rotary_interleaved", "rotary_scaling_factor", "rope_type",
      "original_max_position_embeddings", "max_position_embeddings",
      "beta_fast", "beta_slow", "mscale", "mscale_all_dim", "softmax_scale",
      "qk_layernorm", "make_vocab_size_divisible_by", "params_dtype",
      "autocast_dtype", "pipeline_dtype", "perform_initialization",
      "use_cpu_initialization", "bias_activation_fusion",
      "masked_softmax_fusion", "persist_layer_norm",
      "memory_efficient_layer_norm", "bias_dropout_fusion",
      "apply_rope_fusion", "gradient_accumulation_fusion",
      "cross_entropy_loss_fusion", "cross_entropy_fusion_impl",
      "moe_grouped_gemm", "moe_permute_fusion", "moe_router_fusion",
      "moe_router_load_balancing_type",
      "moe_aux_loss_coeff", "moe_z_loss_coeff", "moe_input_jitter_eps",
      "moe_router_pre_softmax", "moe_router_score_function",
      "moe_router_topk_scaling_factor", "moe_router_enable_expert_bias",
      "moe_router_bias_update_rate", "moe_router_dtype",
      "moe_shared_expert_overlap", "moe_token_drop_policy",
      "moe_pad_expert_input_to_capacity", "moe_per_layer_logging",
      "mtp_loss_scaling_factor", "fp8_recipe", "fp8_margin",
      "fp8_interval", "fp8_amax_history_len", "fp8_amax_compute_algo",
      "fp8_wgrad", "fp8_param", "deterministic_mode", "attention_backend",
      "test_mode", "calculate_per_token_loss", "transformer_impl",
      "use_transformer_engine_op_fuser", "use_te_rng_tracker",
      "seq_len_interpolation_factor", "async_tensor_model_parallel_allreduce",
      // Group-limited routing (DeepSeek-V3 §2.1.2): with the alltoall
      // dispatcher strata emits, every routed copy is still sent, so the
      // all-to-all volume does not change.
      "moe_router_num_groups", "moe_router_group_topk",
      "moe_router_topk_limited_devices",
  };
  return *s;
}

// Parallel layout and run settings in Megatron-core's configs: refused,
// naming the strata flag that sets them (the model file holds the model).
const std::map<std::string, std::string>& LayoutFields() {
  static const auto* m = new std::map<std::string, std::string>{
      {"tensor_model_parallel_size", "--fix tp=N"},
      {"pipeline_model_parallel_size", "--fix pp=N"},
      {"virtual_pipeline_model_parallel_size", "--fix vpp=N"},
      {"context_parallel_size", "--fix cp=N"},
      {"expert_model_parallel_size", "--fix ep=N"},
      {"expert_tensor_parallel_size", "--fix etp=N"},
      {"sequence_parallel", "--fix sp=0|1"},
      {"recompute_granularity", "--fix recompute=selective|full"},
      {"recompute_method", "--fix recompute=full"},
      {"recompute_num_layers", "--fix recompute=full"},
      {"recompute_modules", "--fix recompute=selective"},
      {"num_layers_in_first_pipeline_stage", "--fix first=N"},
      {"num_layers_in_last_pipeline_stage", "--fix last=N"},
      {"pipeline_model_parallel_layout", "--fix layout=STRING"},
      {"account_for_embedding_in_pipeline_split", "--fix embedding_stage=1"},
      {"account_for_loss_in_pipeline_split", "--fix loss_stage=1"},
      {"micro_batch_size", "--fix mbs=N"},
      {"global_batch_size", "--global-batch N"},
  };
  return *m;
}

// Model features Megatron-core has and the cost model does not represent:
// refused rather than silently mispredicted.
const std::map<std::string, std::string>& Unmodelled() {
  static const auto* m = new std::map<std::string, std::string>{
      {"experimental_attention_variant", "sparse attention variants"},
      {"linear_attention_freq", "linear-attention layers"},
      {"is_hybrid_model", "hybrid Mamba models"},
      {"moe_latent_size", "latent MoE"},
      {"heterogeneous_block_specs", "heterogeneous layers"},
  };
  return *m;
}

std::vector<std::string> KnownNames() {
  std::vector<std::string> names;
  const auto* d = ModelSpec::descriptor();
  for (int i = 0; i < d->field_count(); ++i) names.push_back(d->field(i)->name());
  for (const auto& [k, v] : Renamed()) names.push_back(k);
  for (const auto& k : Converted()) names.push_back(k);
  for (const auto& k : Ignored()) names.push_back(k);
  for (const auto& k : MegatronRunFieldNames()) names.push_back(k);
  return names;
}

size_t EditDistance(const std::string& a, const std::string& b) {
  std::vector<size_t> row(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) row[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    size_t diag = row[0];
    row[0] = i;
    for (size_t j = 1; j <= b.size(); ++j) {
      const size_t up = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1,
                         diag + (a[i - 1] == b[j - 1] ? 0 : 1)});
      diag = up;
    }
  }
  return row[b.size()];
}

class Translator {
 public:
  Translator(const std::string& source) : source_(source) {}

  Status Error(const YAML::Node& key, const std::string& field,
               const std::string& what) const {
    const YAML::Mark mark = key.Mark();
    std::string where = source_;
    if (mark.line >= 0) {
      absl::StrAppend(&where, ":", mark.line + 1, ":", mark.column + 1);
    }
    return absl::InvalidArgumentError(
        absl::StrCat(where, ": field '", field, "': ", what));
  }

  // Sets `field` of the output to `value`; a second different value for
  // the same field (an alias next to its ModelSpec name) is refused.
  Status Set(const YAML::Node& key, const std::string& from,
             const std::string& field, const YAML::Node& value) {
    auto it = out_.find(field);
    const std::string text = value.IsScalar() ? value.Scalar() : "";
    if (it != out_.end()) {
      if (it->second.second != text || text.empty()) {
        return Error(key, from,
                     absl::StrCat("sets '", field, "' to ", Quote(text),
                                  ", which '", it->second.first,
                                  "' already set to ",
                                  Quote(it->second.second)));
      }
      return absl::OkStatus();
    }
    out_[field] = {from, text};
    values_[field] = value;
    order_.push_back(field);
    return absl::OkStatus();
  }
  Status SetText(const YAML::Node& key, const std::string& from,
                 const std::string& field, const std::string& value) {
    return Set(key, from, field, YAML::Node(value));
  }

  static std::string Quote(const std::string& s) {
    return absl::StrCat("'", s, "'");
  }

  static StatusOr<bool> Bool(const YAML::Node& v) {
    bool b = false;
    if (v.IsScalar() && YAML::convert<bool>::decode(v, b)) return b;
    return absl::InvalidArgumentError("expected true or false");
  }

  Status Convert(const YAML::Node& key, const std::string& name,
                 const YAML::Node& v) {
    auto bad = [&](const std::string& what) { return Error(key, name, what); };
    if (name == "normalization") {
      const std::string s = absl::AsciiStrToLower(v.IsScalar() ? v.Scalar() : "");
      if (s == "rmsnorm") return SetText(key, name, "norm", "rmsnorm");
      if (s == "layernorm") return SetText(key, name, "norm", "layernorm");
      return bad("expected RMSNorm or LayerNorm");
    }
    if (name == "position_embedding_type") {
      const std::string s = v.IsScalar() ? v.Scalar() : "";
      if (s == "learned_absolute") {
        return SetText(key, name, "position_embedding", "learned");
      }
      // RoPE and its variants, and no position embedding: no parameters.
      if (s == "rope" || s == "yarn" || s == "mrope" || s == "none") {
        return SetText(key, name, "position_embedding", "rope");
      }
      return bad("expected learned_absolute, rope, yarn, mrope or none");
    }
    if (name == "gated_linear_unit") {
      auto b = Bool(v);
      if (!b.ok()) return bad(std::string(b.status().message()));
      gated_ = *b;
      gated_key_ = key;
      return absl::OkStatus();
    }
    if (name == "activation_func") {
      // A name (silu, gelu, squared_relu, ...), possibly qualified
      // (torch.nn.functional.silu) or a Hydra node with `_target_`.
      std::string s;
      if (v.IsScalar()) s = v.Scalar();
      if (v.IsMap() && v["_target_"] && v["_target_"].IsScalar()) {
        s = v["_target_"].Scalar();
      }
      s = absl::AsciiStrToLower(s);
      if (!absl::StrContains(s, "silu") && !absl::StrContains(s, "gelu") &&
          !absl::StrContains(s, "relu") && !absl::StrContains(s, "swish")) {
        return bad("expected silu, gelu or a relu variant (the MLP's GEMMs "
                   "are the same for each; gated_linear_unit decides)");
      }
      return absl::OkStatus();
    }
    if (name == "hidden_dropout" || name == "attention_dropout") {
      double p = 0;
      if (!v.IsScalar() || !YAML::convert<double>::decode(v, p) || p < 0 ||
          p >= 1) {
        return bad("expected a probability in [0, 1)");
      }
      dropout_ = dropout_ || p > 0;
      dropout_given_ = true;
      dropout_key_ = key;
      return absl::OkStatus();
    }
    if (name == "multi_latent_attention") {
      auto b = Bool(v);
      if (!b.ok()) return bad(std::string(b.status().message()));
      mla_ = *b ? 1 : 0;
      mla_key_ = key;
      return absl::OkStatus();
    }
    if (name == "fp8") {
      // Megatron-core: the FP8 format ("e4m3", "hybrid") or null.
      if (v.IsNull()) return absl::OkStatus();
      const std::string s = v.IsScalar() ? v.Scalar() : "";
      if (s != "e4m3" && s != "hybrid") return bad("expected e4m3, hybrid or null");
      return SetText(key, name, "precision", "fp8");
    }
    if (name == "bf16" || name == "fp16") {
      auto b = Bool(v);
      if (!b.ok()) return bad(std::string(b.status().message()));
      if (*b) half_ = name;
      half_key_ = key;
      return absl::OkStatus();
    }
    if (name == "window_size") {
      // Megatron-core: null, or (left, right) keys around each query; a
      // causal sliding window is (w, 0) (gpt-oss: (128, 0)).
      if (v.IsNull()) return absl::OkStatus();
      int left = -1, right = -1;
      if (!v.IsSequence() || v.size() != 2 ||
          !YAML::convert<int>::decode(v[0], left) ||
          !YAML::convert<int>::decode(v[1], right) || left <= 0 || right != 0) {
        return bad(
            "expected null or [w, 0] (a causal window of w > 0 keys; "
            "infinite (-1) and right-hand windows are not modelled)");
      }
      return SetText(key, name, "window_size", std::to_string(left));
    }
    if (name == "window_attn_skip_freq") {
      if (v.IsNull()) return absl::OkStatus();
      int n = 0;
      if (!v.IsScalar() || !YAML::convert<int>::decode(v, n) || n < 1) {
        return bad(
            "expected an integer N >= 1 (every N-th layer attends "
            "fully); per-layer lists are not modelled");
      }
      return Set(key, name, "window_attn_skip_freq", v);
    }
    if (name == "softmax_type") {
      // vanilla; off-by-one (a constant 1 in the denominator, no
      // parameter); learnable: attention sinks, a logit per head.
      const std::string s = v.IsScalar() ? v.Scalar() : "";
      if (s == "learnable")
        return SetText(key, name, "attention_sinks", "true");
      if (s == "vanilla" || s == "off-by-one") return absl::OkStatus();
      return bad("expected vanilla, off-by-one or learnable");
    }
    if (name == "moe_router_force_load_balancing") {
      // Balanced routing: what strata assumes unless moe_load_imbalance.
      auto b = Bool(v);
      if (!b.ok()) return bad(std::string(b.status().message()));
      return absl::OkStatus();
    }
    if (name == "moe_layer_freq") {
      if (v.IsScalar()) return Set(key, name, "moe_layer_freq", v);
      if (!v.IsSequence() || v.size() == 0) {
        return bad("expected an integer or a list of 0 (dense) and 1 (MoE) "
                   "per layer");
      }
      // [0]*k + a period of N (1 then N-1 zeros) repeated: k dense layers,
      // then every N-th layer MoE (ModelSpec's moe_num_dense_layers and
      // moe_layer_freq). Other patterns cannot be said with them.
      std::vector<int> bits;
      for (const auto& e : v) {
        int x = -1;
        if (!e.IsScalar() || !YAML::convert<int>::decode(e, x) ||
            (x != 0 && x != 1)) {
          return bad("list entries must be 0 (dense) or 1 (MoE)");
        }
        bits.push_back(x);
      }
      size_t dense = 0;
      while (dense < bits.size() && bits[dense] == 0) ++dense;
      if (dense == bits.size()) return bad("the list has no MoE layer (1)");
      size_t freq = 1;
      while (dense + freq < bits.size() && bits[dense + freq] == 0) ++freq;
      for (size_t i = dense; i < bits.size(); ++i) {
        if (bits[i] != ((i - dense) % freq == 0 ? 1 : 0)) {
          return bad(absl::StrCat(
              "the list is not leading dense layers then every N-th layer "
              "MoE (entry ", i, " breaks the period ", freq, ")"));
        }
      }
      layer_list_size_ = static_cast<int>(bits.size());
      layer_list_key_ = key;
      RETURN_IF_ERROR(SetText(key, name, "moe_num_dense_layers",
                              std::to_string(dense)));
      return SetText(key, name, "moe_layer_freq", std::to_string(freq));
    }
    return bad("internal: no conversion");
  }

  Status Visit(const YAML::Node& key, const YAML::Node& value) {
    if (!key.IsScalar()) return absl::OkStatus();  // ParseConfig reports it
    const std::string name = key.Scalar();
    // Megatron-core's lists under a ModelSpec name: moe_layer_freq per
    // layer, window_size as (left, right), window_attn_skip_freq per layer.
    if ((name == "moe_layer_freq" || name == "window_size" ||
         name == "window_attn_skip_freq") &&
        (value.IsSequence() || value.IsNull())) {
      changed_ = true;
      return Convert(key, name, value);
    }
    if (ModelSpec::descriptor()->FindFieldByName(name) != nullptr) {
      return Set(key, name, name, value);
    }
    changed_ = true;
    if (auto it = Renamed().find(name); it != Renamed().end()) {
      return Set(key, name, it->second, value);
    }
    if (Converted().count(name)) return Convert(key, name, value);
    if (Ignored().count(name)) return absl::OkStatus();
    if (IsMegatronRunField(name)) {
      auto problem = MegatronRunFieldProblem(name, value);
      if (problem.has_value()) return Error(key, name, *problem);
      return absl::OkStatus();
    }
    if (auto it = LayoutFields().find(name); it != LayoutFields().end()) {
      // Recipes' model providers carry these, mostly unset (null, false).
      bool set = false;
      if (value.IsScalar() && !YAML::convert<bool>::decode(value, set)) {
        set = true;
      }
      if (!value.IsNull() && !value.IsScalar()) set = true;
      if (!set) return absl::OkStatus();
      return Error(key, name,
                   absl::StrCat("a parallel layout setting (",
                                value.IsScalar() ? value.Scalar() : "a list",
                                "), not part of the model: remove it and "
                                "give it to strata plan as ",
                                it->second));
    }
    if (auto it = Unmodelled().find(name); it != Unmodelled().end()) {
      return Error(key, name,
                   absl::StrCat("Megatron-core's ", it->second,
                                ", which strata's cost model does not "
                                "represent (docs/planner.md)"));
    }
    return Error(key, name,
                 absl::StrCat("unknown field in ModelSpec (nearest known "
                              "field: '",
                              NearestModelField(name),
                              "'; docs/planner.md lists the Megatron-core "
                              "names strata accepts)"));
  }

  // Combines the fields that depend on each other.
  Status Finish() {
    // SetText refuses a value that contradicts the ModelSpec name.
    if (gated_.has_value()) {
      RETURN_IF_ERROR(SetText(gated_key_, "gated_linear_unit", "activation",
                              *gated_ ? "swiglu" : "gelu"));
    }
    if (dropout_given_) {
      RETURN_IF_ERROR(SetText(dropout_key_, "hidden_dropout", "dropout",
                              dropout_ ? "true" : "false"));
    }
    if (!half_.empty() && out_.count("precision") == 0) {
      RETURN_IF_ERROR(SetText(half_key_, half_, "precision", half_));
    }
    if (mla_.has_value()) {
      int rank = 0;
      if (auto it = values_.find("kv_lora_rank"); it != values_.end()) {
        YAML::convert<int>::decode(it->second, rank);
      }
      if (*mla_ == 1 && rank <= 0) {
        return Error(mla_key_, "multi_latent_attention",
                     "true needs kv_lora_rank > 0 (and qk_head_dim, "
                     "qk_pos_emb_head_dim, v_head_dim)");
      }
      if (*mla_ == 0 && rank > 0) {
        return Error(mla_key_, "multi_latent_attention",
                     "false contradicts kv_lora_rank > 0 (which turns "
                     "multi-latent attention on)");
      }
    }
    if (layer_list_size_ > 0) {
      int layers = 0;
      if (auto it = values_.find("num_layers"); it != values_.end()) {
        YAML::convert<int>::decode(it->second, layers);
      }
      if (layers != layer_list_size_) {
        return Error(layer_list_key_, "moe_layer_freq",
                     absl::StrCat("the list has ", layer_list_size_,
                                  " entries for num_layers ", layers));
      }
    }
    return absl::OkStatus();
  }

  bool changed() const { return changed_; }

  std::string Emit() const {
    YAML::Emitter e;
    e << YAML::BeginMap;
    for (const std::string& f : order_) {
      e << YAML::Key << f << YAML::Value << values_.at(f);
    }
    e << YAML::EndMap;
    return e.c_str();
  }

 private:
  const std::string& source_;
  // field -> (the name that set it, its scalar text)
  std::map<std::string, std::pair<std::string, std::string>> out_;
  std::map<std::string, YAML::Node> values_;
  std::vector<std::string> order_;
  bool changed_ = false;
  std::optional<bool> gated_;
  YAML::Node gated_key_, dropout_key_, mla_key_, half_key_, layer_list_key_;
  bool dropout_ = false, dropout_given_ = false;
  std::optional<int> mla_;
  std::string half_;
  int layer_list_size_ = 0;
};

// An upper bound on the nesting depth (flow brackets, plus per line its
// indentation and leading "- " entries), to keep the recursive YAML
// parser away from inputs ParseConfig refuses for depth anyway.
int NestingBound(const std::string& text) {
  int depth = 0, deepest_flow = 0, deepest_block = 0;
  bool line_start = true;
  int indent = 0;
  for (size_t i = 0; i < text.size(); ++i) {
    const char ch = text[i];
    if (ch == '\n') {
      line_start = true;
      indent = 0;
      continue;
    }
    if (line_start) {
      if (ch == ' ' || ch == '\t' ||
          (ch == '-' && i + 1 < text.size() &&
           (text[i + 1] == ' ' || text[i + 1] == '\n'))) {
        ++indent;
        deepest_block = std::max(deepest_block, indent);
        continue;
      }
      line_start = false;
    }
    if (ch == '[' || ch == '{') deepest_flow = std::max(deepest_flow, ++depth);
    if ((ch == ']' || ch == '}') && depth > 0) --depth;
  }
  return deepest_flow + deepest_block;
}

}  // namespace

std::string NearestModelField(const std::string& name) {
  return NearestName(name, KnownNames());
}

std::string NearestName(const std::string& name,
                        const std::vector<std::string>& candidates) {
  std::string best;
  size_t best_d = SIZE_MAX;
  for (const std::string& k : candidates) {
    const size_t d = EditDistance(name, k);
    if (d < best_d || (d == best_d && k < best)) {
      best_d = d;
      best = k;
    }
  }
  return best;
}

StatusOr<std::string> TranslateMegatronNames(const std::string& text,
                                             const std::string& source) {
  if (text.size() > kMaxConfigBytes || NestingBound(text) > kMaxConfigDepth) {
    return text;  // ParseConfig refuses it, naming the limit
  }
  try {
    const YAML::Node root = YAML::Load(text);
    if (!root.IsMap()) return text;
    Translator tr(source);
    for (const auto& kv : root) RETURN_IF_ERROR(tr.Visit(kv.first, kv.second));
    if (!tr.changed()) return text;
    RETURN_IF_ERROR(tr.Finish());
    return tr.Emit();
  } catch (const YAML::Exception&) {
    return text;  // ParseConfig reports the problem with its line
  }
}

}  // namespace strata::planner
