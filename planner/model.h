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

// Checks ranges (ModelRanges) and divisibility (heads divide hidden, query
// groups divide heads), then fills defaults. InvalidArgument naming the
// field, its value and its range.
Status NormalizeModel(ModelSpec* model);

// Parameter counts, in parameters (not bytes).
struct ParamCount {
  double per_layer = 0;  // one transformer layer
  double embedding = 0;  // word embedding V h
  double position = 0;   // learned position table s h (0 for RoPE)
  double output = 0;     // untied output projection V h (0 when tied)
  double final_norm = 0;
  double Total(int num_layers) const {
    return per_layer * num_layers + embedding + position + output + final_norm;
  }
};
ParamCount CountParameters(const ModelSpec& model, int seq_length);

// Forward FLOPs per token of one layer, split into the dense GEMMs and the
// core attention (QK^T and AV over a context of `seq_length` keys).
struct LayerFlops {
  double gemm = 0;       // 2 h (h + 2 kv) + 2 h^2 + (4 or 6) h f
  double attention = 0;  // 4 s h
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
StepFlops TrainingFlops(const ModelSpec& model, int64_t global_batch,
                        int seq_length, Recompute::Mode recompute);

}  // namespace strata::planner
