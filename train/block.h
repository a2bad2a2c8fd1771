// One transformer block of a pipeline stage with Megatron tensor
// parallelism (Shoeybi et al. 2019, Fig. 3): forward all-reduces the
// row-parallel outputs (operator g), backward all-reduces the gradient of
// the column-parallel inputs (operator f). `tp` null or of size 1 means no
// tensor parallelism. Activations needed by backward are kept in
// BlockActs (no recomputation).
#pragma once

#include <vector>

#include "comm/backend.h"
#include "common/status.h"
#include "train/model.h"
#include "train/weight_panels.h"

namespace strata::train {

struct BlockDims {
  int seqs = 1;   // sequences in the micro-batch
  int s = 1;      // tokens per sequence
  int h = 1;      // hidden size
  int heads = 1;  // heads on this TP rank
  int d = 1;      // head size
  int f = 1;      // MLP width on this TP rank
  int tokens() const { return seqs * s; }
};

struct BlockActs {
  std::vector<float> x, ln1, mean1, rstd1, q, k, v, probs, att, x2, ln2, mean2,
      rstd2, u, a;
};

// Sum-all-reduce over TP (in place, blocking); a no-op without TP.
Status TpAllReduce(comm::Backend* tp, float* buf, size_t count);

// `panels` (may be null) holds the block weights packed for this step
// (weight_panels.h); the GEMMs read them instead of the weights.
// x may be acts->x.data() (the trainer writes each block's output straight
// into the next block's acts->x); otherwise it is copied there. Neither
// function allocates once acts and the per-thread scratch have their sizes.
Status BlockForward(StageParams& p, const WeightPanels* panels,
                    const LayerParams& l, const BlockDims& dm,
                    comm::Backend* tp, const float* x, BlockActs* acts,
                    float* y);
// Accumulates parameter gradients into p.g; writes dx.
Status BlockBackward(StageParams& p, const WeightPanels* panels,
                     const LayerParams& l, const BlockDims& dm,
                     comm::Backend* tp, const BlockActs& acts, const float* dy,
                     float* dx);

}  // namespace strata::train
