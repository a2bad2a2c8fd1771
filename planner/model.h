// Transformer model shapes: loading, checking, and the parameter and FLOP
// counts the planner's memory and time models are built on.
//
// Formulas (docs/planner.md has the derivations):
// - Parameters: Narayanan et al. SC'21 eq. 2 for GPT,
//   P = 12 l h^2 (1 + 13/(12h) + (V+s)/(12 l h)), generalised here to
//   grouped-query attention (kv = h g / a), any MLP width f and SwiGLU
//   (3 h f instead of 2 h f), RMSNorm and bias-free layers.
// - FLOPs: Narayanan eq. 3, F = 96 B s l h^2 (1 + s/(6h) + V/(16 l h)) with
//   full recompute, i.e. 72 B s l h^2 (1 + s/(6h) + V/(12 l h)) of model
//   FLOPs plus one extra forward pass of the layers; generalised the same
//   way. Attention is counted non-causally, as in eq. 3.
#pragma once

#include <string>
#include <vector>

#include "absl/types/span.h"
#include "common/field_range.h"
#include "common/status.h"
#include "proto/job.pb.h"
#include "proto/model.pb.h"
#include "proto/plan.pb.h"

namespace strata::planner {

// Loads a model from a YAML/JSON file or an embedded preset
// (planner/models/*.yaml) and validates it. Fields left out get
// their documented defaults (query groups = heads, ffn = 4h).
// InvalidArgument naming the file, field, value and range.
StatusOr<ModelSpec> LoadModel(const std::string& file_or_preset);
std::vector<std::string> ModelPresetNames();

// Largest accepted layer count and sequence length (ModelRanges): the
// search and the cost model are sized for them (docs/config.md).
inline constexpr int kMaxLayers = 4096;
inline constexpr int kMaxSeqLength = 1 << 20;

// The documented range of every numeric ModelSpec field (docs/config.md).
absl::Span<const FieldRange> ModelRanges();

// Checks ranges (ModelRanges) and divisibility (heads divide hidden unless
// kv_channels is given, query groups divide heads, top-k at most the
// experts, dense layers fewer than the layers), then fills defaults.
// InvalidArgument naming the field, its value and its range.
Status NormalizeModel(ModelSpec* model);

// The precision a plan runs in: `--fix precision=` (constraints), else the
// job's precision when it is not the default bf16, else the model's, else
// bf16.
Precision::Kind EffectivePrecision(const ModelSpec& model, const JobSpec& job);

// Widths and sizes of one layer that the counts and the cost model share
// (docs/planner.md "Parameters", "MoE"). For standard attention q_dim = h
// and kv_dim = h g / a; `kv_channels` (Qwen3) sets the head size; MLA
// (DeepSeek-V2/V3) has its own projections.
struct LayerShape {
  double h = 0;
  double q_dim = 0;   // query width a d (the projection's input width too)
  double kv_dim = 0;  // key and value width of GQA, g d
  // Keys and values kept for the backward, per token (MLA: a (dn + dr)
  // and a dv after the up-projection).
  double k_width = 0, v_width = 0;
  // Core attention: 4 s attn_width FLOPs per token (QK^T and AV), i.e.
  // attn_width = a (d_qk + d_v) / 2 (h for standard attention).
  double attn_width = 0;
  double attn_params = 0;      // attention weights and biases
  double attn_gemm_flops = 0;  // forward FLOPs per token of those GEMMs
  bool mla = false;
  // MLP: dense layers use ffn (ffn_hidden_size); MoE layers num_experts
  // routed experts of width moe_ffn, top-k of them per token, plus shared
  // experts of total width shared_ffn, and a router (h x experts).
  double ffn = 0, moe_ffn = 0, shared_ffn = 0;
  double mlp_mult = 2;  // weight matrices per MLP: 2 (GELU) or 3 (SwiGLU)
  int experts = 0, topk = 0;
  int moe_layers = 0;       // of num_layers
  double moe_fraction = 0;  // moe_layers / num_layers
  double imbalance = 1;     // tokens on the busiest expert rank / balanced
  double norm_params = 0;   // one norm
  // Sliding-window attention: keys per query on windowed layers (0: none)
  // and the share of layers that are windowed.
  double window = 0, window_fraction = 0;
};
LayerShape ShapeOfLayers(const ModelSpec& model);

// Keys one query of the mean layer attends to in a sequence of
// `seq_length` (sliding windows shorten them on windowed layers): for the
// FLOP count, or (`work`) for the attention kernel's time, which reads
// s/2 keys per causal query on full layers but the whole window on
// windowed ones.
double AttentionKeys(const LayerShape& ls, double seq_length, bool work);

// Parameter counts, in parameters (not bytes). For MoE models the per-layer
// figures are means over the layers (dense and MoE layers mixed).
struct ParamCount {
  double per_layer = 0;  // one transformer layer, every expert counted
  // Of per_layer: the routed experts (all of them), and those a token uses.
  double expert_per_layer = 0;
  double active_expert_per_layer = 0;
  double embedding = 0;  // word embedding V h
  double position = 0;   // learned position table s h (0 for RoPE)
  double output = 0;     // untied output projection V h (0 when tied)
  double final_norm = 0;
  // Multi-token-prediction modules (mtp_num_layers; on the last stage):
  // all their parameters, and those a token meets.
  double mtp = 0, mtp_active = 0;
  double Total(int num_layers) const {
    return per_layer * num_layers + embedding + position + output +
           final_norm + mtp;
  }
  // Parameters one token meets (MoE: only its top-k routed experts).
  double Active(int num_layers) const {
    return (per_layer - expert_per_layer + active_expert_per_layer) *
               num_layers +
           embedding + position + output + final_norm + mtp_active;
  }
};
ParamCount CountParameters(const ModelSpec& model, int seq_length);

// Forward FLOPs per token of one layer (the mean layer of an MoE model),
// split into the GEMMs and the core attention (QK^T and AV over a context
// of `seq_length` keys).
struct LayerFlops {
  double gemm = 0;       // 2 h (h + 2 kv) + 2 h^2 + (4 or 6) h f (dense)
  double attention = 0;  // 4 s h (standard attention)
};
LayerFlops LayerForwardFlopsPerToken(const ModelSpec& model, int seq_length);

// Training FLOPs of one optimizer step of `global_batch` sequences:
// model FLOPs (forward + backward = 3x forward, no recompute) and the
// extra forward work that `recompute` adds (hardware FLOPs = sum).
struct StepFlops {
  double model = 0;
  double recompute = 0;
  double Hardware() const { return model + recompute; }
};
// `fp8`: the linears run as FP8 GEMMs (torchtitan's Float8 linears), which
// only Recompute::selective_op reads (below).
StepFlops TrainingFlops(const ModelSpec& model, int64_t global_batch,
                        int seq_length, Recompute::Mode recompute,
                        bool fp8 = false);

// Forward GEMM FLOPs per token of one layer (the mean layer) that
// torchtitan's op-level selective checkpointing recomputes in the
// backward (Recompute::selective_op). torchtitan (parallelize_llama.py at
// 9dec370, `_save_list` and `_custom_policy`) saves the output of every
// odd-numbered aten.mm of a block's forward and recomputes the even ones:
// in forward order wq, wk, wv, wo, w1, w3, w2 (SwiGLU; w1, w2 for GELU),
// so wk, wo and w3 (GELU: w2), 2 h kv + 2 q h + 2 h f. Ops outside the save
// list are recomputed whole: the routed experts' grouped GEMMs, and every
// linear under Float8 (torch._scaled_mm is not in the 2024-12 list), which
// then recomputes all of the layer's GEMMs.
double SelectiveOpRecomputedGemmFlops(const ModelSpec& model, bool fp8);

}  // namespace strata::planner
