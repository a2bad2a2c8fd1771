#include "planner/model.h"

#include <algorithm>

#include <sys/stat.h>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "common/config.h"
#include "common/preset.h"
#include "planner/megatron_names.h"

namespace strata {
extern const EmbeddedFile kModelPresets[];
extern const int kModelPresets_count;
}  // namespace strata

namespace strata::planner {
namespace {

Status Require(bool ok, const ModelSpec& m, const std::string& what) {
  if (ok) return absl::OkStatus();
  return absl::InvalidArgumentError(
      absl::StrCat("model '", m.name(), "': ", what));
}

}  // namespace

std::vector<std::string> ModelPresetNames() {
  return PresetNames(kModelPresets, kModelPresets_count);
}

absl::Span<const FieldRange> ModelRanges() {
  static constexpr FieldRange kRanges[] = {
      {"num_layers", 1, kMaxLayers, false, "transformer layers"},
      {"hidden_size", 1, 262144, false, "model width h"},
      {"num_attention_heads", 1, 65536, false, "must divide hidden_size"},
      {"num_query_groups", 1, 65536, false,
       "must divide the heads; absent: the heads (multi-head attention)"},
      {"ffn_hidden_size", 1, 1048576, false, "MLP width; absent: 4 h"},
      {"vocab_size", 1, 16777216, false, "tokens"},
      {"seq_length", 1, kMaxSeqLength, false,
       "default training sequence, tokens; absent: give --seq"},
      {"num_experts", 0, 65536, false,
       "routed experts per MoE layer; 0: dense"},
      {"moe_router_topk", 1, 65536, false,
       "experts per token, at most num_experts; absent: 2"},
      {"moe_ffn_hidden_size", 1, 1048576, false,
       "one routed expert's MLP width; absent: ffn_hidden_size"},
      {"moe_shared_expert_intermediate_size", 0, 1048576, false,
       "total width of the shared experts; 0: none"},
      {"moe_num_dense_layers", 0, kMaxLayers, false,
       "leading dense layers, fewer than num_layers"},
      {"moe_layer_freq", 1, kMaxLayers, false,
       "every N-th layer after the dense ones is MoE; absent: 1"},
      {"moe_capacity_factor", 0, 1000, true,
       "expert capacity / balanced share; absent: dropless"},
      {"moe_load_imbalance", 1, 1000, false,
       "busiest expert rank's tokens / balanced share; absent: 1"},
      {"kv_channels", 1, 65536, false,
       "head size; absent: hidden_size / num_attention_heads"},
      {"q_lora_rank", 0, 262144, false, "MLA query rank; 0: none"},
      {"kv_lora_rank", 0, 262144, false, "MLA key/value rank; 0: not MLA"},
      {"qk_pos_emb_head_dim", 0, 65536, false, "MLA rotary head part"},
      {"v_head_dim", 0, 65536, false, "MLA value head size"},
      {"mtp_num_layers", 0, 16, false,
       "multi-token-prediction depths; 0: none"},
      {"window_size", 0, kMaxSeqLength, false,
       "sliding-window attention: keys per query; 0: full attention"},
      {"window_attn_skip_freq", 0, kMaxLayers, false,
       "with window_size: every N-th layer attends fully; 0: none"},
  };
  return kRanges;
}

Status NormalizeModel(ModelSpec* m) {
  const std::string where = absl::StrCat("model '", m->name(), "'");
  RETURN_IF_ERROR(CheckRanges(*m, ModelRanges(), where));
  // With kv_channels the heads need not split the hidden size (Qwen3:
  // 32 heads of 128 on hidden 2048).
  RETURN_IF_ERROR(Require(
      m->has_kv_channels() || m->hidden_size() % m->num_attention_heads() == 0,
      *m,
      absl::StrCat("hidden_size ", m->hidden_size(),
                   " is not divisible by num_attention_heads ",
                   m->num_attention_heads(),
                   " (give kv_channels for another head size)")));
  if (m->kv_lora_rank() > 0) {
    RETURN_IF_ERROR(Require(
        m->has_kv_channels() && m->v_head_dim() > 0, *m,
        "multi-latent attention (kv_lora_rank > 0) needs kv_channels or "
        "Megatron-core's qk_head_dim (the query/key head size without the "
        "rotary part) and v_head_dim"));
  }
  if (m->num_experts() == 0) {
    RETURN_IF_ERROR(Require(
        !m->has_moe_router_topk() && !m->has_moe_ffn_hidden_size() &&
            m->moe_shared_expert_intermediate_size() == 0 &&
            m->moe_num_dense_layers() == 0,
        *m,
        "MoE fields (moe_router_topk, moe_ffn_hidden_size, "
        "moe_shared_expert_intermediate_size, moe_num_dense_layers) need "
        "num_experts > 0"));
  } else {
    if (!m->has_moe_router_topk()) m->set_moe_router_topk(2);
    RETURN_IF_ERROR(
        Require(m->moe_router_topk() <= m->num_experts(), *m,
                absl::StrCat("field 'moe_router_topk' = ", m->moe_router_topk(),
                             " exceeds num_experts ", m->num_experts(),
                             " (range [1, num_experts])")));
    RETURN_IF_ERROR(Require(
        m->moe_num_dense_layers() < m->num_layers(), *m,
        absl::StrCat("field 'moe_num_dense_layers' = ",
                     m->moe_num_dense_layers(), " leaves no MoE layer of ",
                     m->num_layers(), " (range [0, num_layers - 1])")));
  }
  RETURN_IF_ERROR(Require(
      m->window_size() > 0 || m->window_attn_skip_freq() == 0, *m,
      "field 'window_attn_skip_freq' needs window_size > 0 (sliding-window "
      "attention)"));
  if (!m->has_num_query_groups()) {
    m->set_num_query_groups(m->num_attention_heads());
  }
  RETURN_IF_ERROR(
      Require(m->num_attention_heads() % m->num_query_groups() == 0, *m,
              absl::StrCat("num_attention_heads ", m->num_attention_heads(),
                           " is not divisible by num_query_groups ",
                           m->num_query_groups())));
  if (!m->has_ffn_hidden_size()) m->set_ffn_hidden_size(4 * m->hidden_size());
  if (m->num_experts() > 0 && !m->has_moe_ffn_hidden_size()) {
    m->set_moe_ffn_hidden_size(m->ffn_hidden_size());
  }
  return absl::OkStatus();
}

Precision::Kind EffectivePrecision(const ModelSpec& model, const JobSpec& job) {
  if (job.constraints().has_precision()) return job.constraints().precision();
  if (job.precision() != Precision::bf16) return job.precision();
  return model.has_precision() ? model.precision() : Precision::bf16;
}

LayerShape ShapeOfLayers(const ModelSpec& m) {
  LayerShape ls;
  const double h = m.hidden_size();
  const double a = m.num_attention_heads();
  const bool bias = m.linear_bias();
  ls.h = h;
  ls.norm_params = m.norm() == Norm::layernorm ? 2 * h : h;
  if (m.kv_lora_rank() > 0) {
    // Multi-latent attention (DeepSeek-V2 §2.1, DeepSeek-V3 §2.1.1):
    // queries h -> q_lora (normed) -> a (dn + dr), or h -> a (dn + dr)
    // without q_lora; keys/values h -> kv_lora + dr (normed), then
    // kv_lora -> a (dn + dv); output a dv -> h. Megatron-core
    // MLASelfAttention materialises per-head K and V after the
    // up-projection, so the core attention is MHA with head sizes
    // dn + dr (QK) and dv (V).
    const double dn = m.kv_channels(), dr = m.qk_pos_emb_head_dim(),
                 dv = m.v_head_dim(), ql = m.q_lora_rank(),
                 kl = m.kv_lora_rank();
    const double q_w = ql > 0 ? h * ql + ql * a * (dn + dr) : h * a * (dn + dr);
    const double kv_w = h * (kl + dr) + kl * a * (dn + dv);
    const double o_w = a * dv * h;
    ls.mla = true;
    ls.q_dim = a * dv;
    ls.kv_dim = 0;
    ls.k_width = a * (dn + dr);
    ls.v_width = a * dv;
    ls.attn_width = a * (dn + dr + dv) / 2;
    ls.attn_params = q_w + kv_w + o_w + (ql > 0 ? ql : 0) + kl;  // + norms
    ls.attn_gemm_flops = 2 * (q_w + kv_w + o_w);
  } else {
    // d = h / a exactly when kv_channels is absent, so q_dim == h.
    const double d = m.has_kv_channels()
                         ? m.kv_channels()
                         : m.hidden_size() / m.num_attention_heads();
    const double q = a * d;
    const double kv = m.num_query_groups() * d;
    ls.q_dim = q;
    ls.kv_dim = kv;
    ls.k_width = ls.v_width = kv;
    ls.attn_width = m.has_kv_channels() ? q : h;
    // Fused QKV (h -> q + 2 kv) and output projection (q -> h).
    ls.attn_params = h * (q + 2 * kv) + q * h + (bias ? (q + 2 * kv) + h : 0) +
                     (m.attention_sinks() ? a : 0);
    ls.attn_gemm_flops = 2 * h * (q + 2 * kv) + 2 * q * h;
  }
  if (m.window_size() > 0) {
    const int freq = m.window_attn_skip_freq();
    const int full = freq > 0 ? m.num_layers() / freq : 0;
    ls.window = m.window_size();
    ls.window_fraction =
        static_cast<double>(m.num_layers() - full) / m.num_layers();
  }
  ls.mlp_mult = m.activation() == Activation::swiglu ? 3 : 2;
  ls.ffn = m.ffn_hidden_size();
  ls.experts = m.num_experts();
  if (ls.experts > 0) {
    ls.topk = m.moe_router_topk();
    ls.moe_ffn = m.moe_ffn_hidden_size();
    ls.shared_ffn = m.moe_shared_expert_intermediate_size();
    const int freq = m.has_moe_layer_freq() ? m.moe_layer_freq() : 1;
    const int dense = m.moe_num_dense_layers();
    ls.moe_layers = (m.num_layers() - dense + freq - 1) / freq;
    ls.moe_fraction = static_cast<double>(ls.moe_layers) / m.num_layers();
    ls.imbalance = m.has_moe_load_imbalance() ? m.moe_load_imbalance() : 1;
    // Tokens above capacity are dropped (Megatron-core
    // --moe-expert-capacity-factor), so no rank gets more than that.
    if (m.has_moe_capacity_factor()) {
      ls.imbalance =
          std::min(ls.imbalance, std::max(1.0, m.moe_capacity_factor()));
    }
  }
  return ls;
}

StatusOr<ModelSpec> LoadModel(const std::string& file_or_preset) {
  ModelSpec model;
  // The file or preset text, read the way LoadConfigOrPreset decides
  // between them, so that Megatron-core names can be translated first.
  std::string text, source;
  struct stat st;
  const bool exists = ::stat(file_or_preset.c_str(), &st) == 0;
  const bool path = exists || absl::StrContains(file_or_preset, "/") ||
                    absl::EndsWith(file_or_preset, ".yaml") ||
                    absl::EndsWith(file_or_preset, ".yml") ||
                    absl::EndsWith(file_or_preset, ".json");
  if (path && exists && S_ISREG(st.st_mode) &&
      static_cast<size_t>(st.st_size) <= kMaxConfigBytes) {
    ASSIGN_OR_RETURN(text, ReadFile(file_or_preset));
    source = file_or_preset;
  } else if (!path) {
    for (int i = 0; i < kModelPresets_count; ++i) {
      if (file_or_preset == kModelPresets[i].name) {
        text = kModelPresets[i].contents;
        source = absl::StrCat("model preset '", file_or_preset, "'");
      }
    }
  }
  if (source.empty()) {
    // Missing, oversized or special files and unknown presets: the
    // loader's own errors.
    RETURN_IF_ERROR(LoadConfigOrPreset(file_or_preset, kModelPresets,
                                       kModelPresets_count, "model", &model,
                                       ModelRanges()));
  } else {
    ASSIGN_OR_RETURN(std::string translated,
                     TranslateMegatronNames(text, source));
    RETURN_IF_ERROR(ParseConfig(translated, source, &model, ModelRanges()));
  }
  if (model.name().empty()) model.set_name(file_or_preset);
  RETURN_IF_ERROR(NormalizeModel(&model));
  return model;
}

namespace {

// One MLP of width f: GELU has up (h -> f) and down (f -> h); SwiGLU adds a
// gate (h -> f).
double MlpParams(const ModelSpec& m, double f) {
  const double h = m.hidden_size();
  const bool bias = m.linear_bias();
  return m.activation() == Activation::swiglu
             ? 3 * h * f + (bias ? 2 * f + h : 0)
             : 2 * h * f + (bias ? f + h : 0);
}

}  // namespace

ParamCount CountParameters(const ModelSpec& m, int seq_length) {
  const LayerShape ls = ShapeOfLayers(m);
  const double h = m.hidden_size();
  const double norm = ls.norm_params;
  ParamCount p;
  const double attn = ls.attn_params;
  // Dense layers: one MLP of ffn_hidden_size. MoE layers (Megatron-core
  // MoELayer): the router (h x experts), every routed expert, and the
  // shared experts; averaged over the layers.
  double mlp = MlpParams(m, ls.ffn);
  if (ls.experts > 0) {
    const double l = m.num_layers();
    const double expert = MlpParams(m, ls.moe_ffn);
    const double moe = h * ls.experts + ls.experts * expert +
                       (ls.shared_ffn > 0 ? MlpParams(m, ls.shared_ffn) : 0);
    mlp = ((l - ls.moe_layers) * mlp + ls.moe_layers * moe) / l;
    p.expert_per_layer = ls.moe_layers * ls.experts * expert / l;
    p.active_expert_per_layer = ls.moe_layers * ls.topk * expert / l;
  }
  p.per_layer = attn + mlp + 2 * norm;  // two norms per layer
  p.embedding = static_cast<double>(m.vocab_size()) * h;
  p.position =
      m.position_embedding() == PositionEmbedding::learned ? seq_length * h : 0;
  p.output = m.tied_embeddings() ? 0 : p.embedding;
  p.final_norm = norm;
  // Multi-token prediction (DeepSeek-V3 §2.2, eq. 21-22; Megatron-core
  // MultiTokenPredictionLayer): per depth two RMSNorms, the projection
  // M (2h -> h) and one transformer layer, costed as the mean layer; the
  // embedding and output head are the main model's.
  p.mtp = m.mtp_num_layers() * (2 * norm + 2 * h * h + p.per_layer);
  p.mtp_active =
      m.mtp_num_layers() * (2 * norm + 2 * h * h + p.per_layer -
                            p.expert_per_layer + p.active_expert_per_layer);
  return p;
}

double AttentionKeys(const LayerShape& ls, double seq_length, bool work) {
  if (ls.window <= 0) return seq_length;
  // FLOP count: min(w, s) keys, as s for full layers (non-causal count,
  // Narayanan eq. 3). Work: a causal query reads s/2 keys on average and a
  // windowed one min(w, s), so the kernel time of a windowed layer is that
  // of min(2w, s) keys in the full-layer formula.
  const double windowed =
      std::min(work ? 2 * ls.window : ls.window, seq_length);
  return (1 - ls.window_fraction) * seq_length + ls.window_fraction * windowed;
}

LayerFlops LayerForwardFlopsPerToken(const ModelSpec& m, int seq_length) {
  const LayerShape ls = ShapeOfLayers(m);
  const double h = m.hidden_size();
  const double mlp_mult = 2 * ls.mlp_mult;  // 4 (GELU) or 6 (SwiGLU)
  LayerFlops lf;
  // 2 FLOPs per multiply-add: QKV 2h(h+2kv), projection 2h^2, MLP 4hf/6hf.
  double mlp = mlp_mult * h * ls.ffn;
  if (ls.experts > 0) {
    // An MoE layer's token meets the router (2 h E), its top-k experts and
    // the shared experts; only those count (active parameters).
    const double l = m.num_layers();
    const double moe = 2 * h * ls.experts +
                       mlp_mult * h * (ls.topk * ls.moe_ffn + ls.shared_ffn);
    mlp = ((l - ls.moe_layers) * mlp + ls.moe_layers * moe) / l;
  }
  lf.gemm = ls.attn_gemm_flops + mlp;
  // QK^T and attention-times-V: 2 s h each per token (Narayanan eq. 3),
  // over the keys a query meets: s, or the window on windowed layers.
  lf.attention = 4.0 * AttentionKeys(ls, seq_length, false) * ls.attn_width;
  return lf;
}

double SelectiveOpRecomputedGemmFlops(const ModelSpec& m, bool fp8) {
  const LayerFlops lf = LayerForwardFlopsPerToken(m, 1);
  if (fp8) return lf.gemm;
  const LayerShape ls = ShapeOfLayers(m);
  const double h = ls.h;
  // MLA has no wq/wk/wv triple: half of its projections, as every other mm.
  const double attn =
      ls.mla ? ls.attn_gemm_flops / 2 : 2 * h * ls.kv_dim + 2 * ls.q_dim * h;
  const double dense_mlp = 2 * h * ls.ffn;  // w3 (SwiGLU) or w2 (GELU)
  // The MoE layers' MLP FLOPs per token (router, top-k experts, shared):
  // the mean layer's GEMMs less attention and the dense layers' MLPs.
  const double moe_mlp =
      ls.experts > 0 ? (lf.gemm - ls.attn_gemm_flops -
                        (1 - ls.moe_fraction) * 2 * ls.mlp_mult * h * ls.ffn) /
                           ls.moe_fraction
                     : 0;
  return attn + (1 - ls.moe_fraction) * dense_mlp + ls.moe_fraction * moe_mlp;
}

StepFlops TrainingFlops(const ModelSpec& m, int64_t global_batch,
                        int seq_length, Recompute::Mode recompute, bool fp8) {
  const LayerFlops lf = LayerForwardFlopsPerToken(m, seq_length);
  const double tokens = static_cast<double>(global_batch) * seq_length;
  const double layers = m.num_layers();
  const double logits = 2.0 * m.hidden_size() * m.vocab_size();
  StepFlops f;
  // Backward costs twice the forward (Narayanan §5.1 / eq. 3).
  // Each multi-token-prediction depth runs its projection (2h -> h), one
  // layer and the output head again (DeepSeek-V3 §2.2).
  const double mtp = m.mtp_num_layers() *
                     (2.0 * 2 * m.hidden_size() * m.hidden_size() + lf.gemm +
                      lf.attention + logits);
  f.model = 3 * tokens * (layers * (lf.gemm + lf.attention) + logits + mtp);
  if (recompute == Recompute::full) {
    f.recompute = tokens * layers * (lf.gemm + lf.attention);
  } else if (recompute == Recompute::selective) {
    f.recompute = tokens * layers * lf.attention;  // Korthikanti §5
  } else if (recompute == Recompute::selective_op) {
    f.recompute = tokens * layers * SelectiveOpRecomputedGemmFlops(m, fp8);
  }
  return f;
}

}  // namespace strata::planner
