#include "planner/model.h"

#include "absl/strings/str_cat.h"
#include "common/preset.h"

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
  };
  return kRanges;
}

Status NormalizeModel(ModelSpec* m) {
  const std::string where = absl::StrCat("model '", m->name(), "'");
  RETURN_IF_ERROR(CheckRanges(*m, ModelRanges(), where));
  RETURN_IF_ERROR(
      Require(m->hidden_size() % m->num_attention_heads() == 0, *m,
              absl::StrCat("hidden_size ", m->hidden_size(),
                           " is not divisible by num_attention_heads ",
                           m->num_attention_heads())));
  if (!m->has_num_query_groups()) {
    m->set_num_query_groups(m->num_attention_heads());
  }
  RETURN_IF_ERROR(
      Require(m->num_attention_heads() % m->num_query_groups() == 0, *m,
              absl::StrCat("num_attention_heads ", m->num_attention_heads(),
                           " is not divisible by num_query_groups ",
                           m->num_query_groups())));
  if (!m->has_ffn_hidden_size()) m->set_ffn_hidden_size(4 * m->hidden_size());
  return absl::OkStatus();
}

StatusOr<ModelSpec> LoadModel(const std::string& file_or_preset) {
  ModelSpec model;
  RETURN_IF_ERROR(LoadConfigOrPreset(file_or_preset, kModelPresets,
                                     kModelPresets_count, "model", &model,
                                     ModelRanges()));
  if (model.name().empty()) model.set_name(file_or_preset);
  RETURN_IF_ERROR(NormalizeModel(&model));
  return model;
}

ParamCount CountParameters(const ModelSpec& m, int seq_length) {
  const double h = m.hidden_size();
  const double kv = h * m.num_query_groups() / m.num_attention_heads();
  const double f = m.ffn_hidden_size();
  const bool bias = m.linear_bias();
  const double norm = m.norm() == Norm::layernorm ? 2 * h : h;
  ParamCount p;
  // Attention: fused QKV (h -> h + 2 kv) and output projection (h -> h).
  double attn = h * (h + 2 * kv) + h * h + (bias ? (h + 2 * kv) + h : 0);
  // MLP: GELU has up (h -> f) and down (f -> h); SwiGLU adds a gate (h -> f).
  double mlp = m.activation() == Activation::swiglu
                   ? 3 * h * f + (bias ? 2 * f + h : 0)
                   : 2 * h * f + (bias ? f + h : 0);
  p.per_layer = attn + mlp + 2 * norm;  // two norms per layer
  p.embedding = static_cast<double>(m.vocab_size()) * h;
  p.position =
      m.position_embedding() == PositionEmbedding::learned ? seq_length * h : 0;
  p.output = m.tied_embeddings() ? 0 : p.embedding;
  p.final_norm = norm;
  return p;
}

LayerFlops LayerForwardFlopsPerToken(const ModelSpec& m, int seq_length) {
  const double h = m.hidden_size();
  const double kv = h * m.num_query_groups() / m.num_attention_heads();
  const double f = m.ffn_hidden_size();
  const double mlp_mult = m.activation() == Activation::swiglu ? 6 : 4;
  LayerFlops lf;
  // 2 FLOPs per multiply-add: QKV 2h(h+2kv), projection 2h^2, MLP 4hf/6hf.
  lf.gemm = 2 * h * (h + 2 * kv) + 2 * h * h + mlp_mult * h * f;
  // QK^T and attention-times-V: 2 s h each per token (Narayanan eq. 3).
  lf.attention = 4.0 * seq_length * h;
  return lf;
}

StepFlops TrainingFlops(const ModelSpec& m, int64_t global_batch,
                        int seq_length, Recompute::Mode recompute) {
  const LayerFlops lf = LayerForwardFlopsPerToken(m, seq_length);
  const double tokens = static_cast<double>(global_batch) * seq_length;
  const double layers = m.num_layers();
  const double logits = 2.0 * m.hidden_size() * m.vocab_size();
  StepFlops f;
  // Backward costs twice the forward (Narayanan §5.1 / eq. 3).
  f.model = 3 * tokens * (layers * (lf.gemm + lf.attention) + logits);
  if (recompute == Recompute::full) {
    f.recompute = tokens * layers * (lf.gemm + lf.attention);
  } else if (recompute == Recompute::selective) {
    f.recompute = tokens * layers * lf.attention;  // Korthikanti §5
  }
  return f;
}

}  // namespace strata::planner
