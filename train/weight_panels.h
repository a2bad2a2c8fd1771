// The weights of a pipeline stage, packed for PanelGemm
// (common/panel_gemm.h): for every 2-D weight W [in, out] of a block
// (y = x W), and for the tied LM head on the last stage (W = wte^T), the
// panels of W for the forward GEMM and of W^T for the input-gradient GEMM.
// Contract: a cache of StageParams::w, valid from Pack() until the weights
// next change; the trainer packs at the start of every step, so the
// optimizer, a resume or a rollback never leaves it stale. Costs twice the
// packed weights' memory. Empty (every pointer null, callers then use the
// weights themselves through OpenBLAS) when `enabled` is false and where
// PanelGemm is unavailable (no AVX-512F).
#pragma once

#include <cstddef>
#include <vector>

#include "train/huge_pages.h"
#include "train/model.h"

namespace strata::train {

class WeightPanels {
 public:
  WeightPanels(const StageParams& p, bool enabled);

  // Repacks every weight from p.w (the StageParams given at construction).
  void Pack(const StageParams& p);

  // The panels of shard `shard`'s W (Forward) or W^T (Backward); null when
  // it has none.
  const float* Forward(int shard) const { return At(fwd_, shard); }
  const float* Backward(int shard) const { return At(bwd_, shard); }

 private:
  static constexpr size_t kNone = ~size_t{0};
  const float* At(const std::vector<size_t>& at, int shard) const {
    return at[shard] == kNone ? nullptr : buf_.data() + at[shard];
  }
  HugeFloats buf_;
  std::vector<size_t> fwd_, bwd_;  // per shard: offset in buf_, or kNone
};

}  // namespace strata::train
