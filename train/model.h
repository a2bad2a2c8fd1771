// The reference GPT: configuration presets, the parallel layout
// (which stage holds which layers, how tensor parallelism splits each
// weight) and this rank's parameters in one flat buffer.
//
// Tensor parallelism follows Megatron-LM (Shoeybi et al. 2019, §3): Q, K, V
// and the first MLP weight are split by output columns (column-parallel,
// whole heads per rank), the attention output and second MLP weight by
// input rows (row-parallel); LayerNorms, the embeddings and the biases of
// row-parallel layers are replicated across TP. Weights are [in, out]
// (y = x W). Every parameter shard is a box of its global tensor, so
// checkpoints are written and read in global coordinates.
//
// Pipeline stages hold layers [s L/p, (s+1) L/p), or the counts of
// Parallel::stage_layers when given (an uneven split, e.g. fewer layers on a
// slow node's stage, docs/train.md); the first stage holds the
// embeddings, the last the final LayerNorm and — when p > 1 — a copy of the
// token embedding for the tied LM head, kept equal by summing the two
// copies' gradients (Megatron's embedding group).
#pragma once

#include <cstdint>
#include <utility>
#include <string>
#include <vector>

#include "common/status.h"
#include "train/huge_pages.h"

namespace strata::train {

struct ModelConfig {
  std::string name;
  int vocab = 0, seq = 0, hidden = 0, heads = 0, layers = 0;
  int ffn() const { return 4 * hidden; }  // GPT-2
};

// "tiny" (~225k parameters, tests) and "small" (~10M, the demo).
StatusOr<ModelConfig> ModelPreset(const std::string& name);
int64_t ParameterCount(const ModelConfig& m);

struct Parallel {
  int tp = 1, pp = 1, dp = 1;
  int tp_rank = 0, pp_rank = 0, dp_rank = 0;
  // Layers per pipeline stage; empty: L/pp each.
  std::vector<int> stage_layers;
  // [first, end) of this rank's stage's layers.
  std::pair<int, int> LayerRange(int layers) const;
};

// InvalidArgument naming the first size that does not divide, or a
// stage_layers list that is not pp counts >= 1 summing to the layers.
Status ValidateSplit(const ModelConfig& m, const Parallel& p, int global_batch,
                     int micro_batch);

// One parameter shard held by this rank, at [start, start+size) of the flat
// buffers.
struct ParamShard {
  std::string name;  // global name, e.g. "h.3.attn.q_w"
  std::vector<int64_t> global_shape, local_shape, offset;
  size_t start = 0, size = 0;
  bool decay = false;          // AdamW weight decay (2-D weights only)
  bool tp_replicated = false;  // same on every TP rank
  bool tied_copy = false;      // the last stage's copy of "wte"
};

// Indices into StageParams::shards of one transformer block.
struct LayerParams {
  int ln1_g, ln1_b, q_w, q_b, k_w, k_b, v_w, v_b, o_w, o_b;
  int ln2_g, ln2_b, fc1_w, fc1_b, fc2_w, fc2_b;
  size_t begin = 0, end = 0;  // its contiguous range of the flat buffer
};

class StageParams {
 public:
  StageParams(const ModelConfig& m, const Parallel& p);

  // Deterministic in (seed, name, global element index): every split of
  // the model starts from the same global weights. GPT-2 init: N(0, 0.02),
  // residual projections N(0, 0.02/sqrt(2L)), biases 0, LayerNorm 1/0.
  void Init(uint64_t seed);

  float* W(int shard) { return w.data() + shards[shard].start; }
  float* G(int shard) { return g.data() + shards[shard].start; }

  HugeFloats w, g;  // weights and gradients, flat (huge pages)
  std::vector<ParamShard> shards;
  std::vector<LayerParams> layers;  // this stage's blocks, in order
  int first_layer = 0;
  int wte = -1, wpe = -1, lnf_g = -1, lnf_b = -1;

 private:
  int Add(std::string name, std::vector<int64_t> global_shape,
          std::vector<int64_t> local_shape, std::vector<int64_t> offset,
          bool decay, bool tp_replicated);
  int total_layers_ = 0;
};

}  // namespace strata::train
