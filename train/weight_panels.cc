#include "train/weight_panels.h"

#include <cblas.h>

#include "common/panel_gemm.h"

namespace strata::train {

WeightPanels::WeightPanels(const StageParams& p, bool enabled)
    : fwd_(p.shards.size(), kNone), bwd_(p.shards.size(), kNone) {
  // PanelGemm runs on the calling thread only: with more BLAS threads per
  // rank OpenBLAS's threaded GEMMs are the faster choice.
  if (!enabled || !PanelGemmAvailable() || openblas_get_num_threads() != 1) {
    return;
  }
  size_t size = 0;
  for (const LayerParams& l : p.layers) {
    for (int s : {l.q_w, l.k_w, l.v_w, l.o_w, l.fc1_w, l.fc2_w}) {
      const auto& shape = p.shards[s].local_shape;
      const int in = static_cast<int>(shape[0]),
                out = static_cast<int>(shape[1]);
      fwd_[s] = size;
      size += PanelFloats(in, out);
      bwd_[s] = size;
      size += PanelFloats(out, in);
    }
  }
  buf_.resize(size);
}

void WeightPanels::Pack(const StageParams& p) {
  for (size_t s = 0; s < fwd_.size(); ++s) {
    if (fwd_[s] == kNone) continue;
    const auto& shape = p.shards[s].local_shape;
    const int in = static_cast<int>(shape[0]), out = static_cast<int>(shape[1]);
    const float* w = p.w.data() + p.shards[s].start;
    PackPanels(w, out, false, in, out, buf_.data() + fwd_[s]);
    PackPanels(w, out, true, out, in, buf_.data() + bwd_[s]);
  }
}

}  // namespace strata::train
