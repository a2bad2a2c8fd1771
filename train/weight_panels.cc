#include "train/weight_panels.h"

#include "common/panel_gemm.h"

namespace strata::train {

WeightPanels::WeightPanels(const StageParams& p, bool enabled)
    : fwd_(p.shards.size(), kNone), bwd_(p.shards.size(), kNone) {
  if (!enabled || !PanelGemmAvailable()) return;
  size_t size = 0;
  auto add = [&](int s, int in, int out) {
    fwd_[s] = size;
    size += PanelFloats(in, out);
    bwd_[s] = size;
    size += PanelFloats(out, in);
  };
  for (const LayerParams& l : p.layers) {
    for (int s : {l.q_w, l.k_w, l.v_w, l.o_w, l.fc1_w, l.fc2_w}) {
      const auto& shape = p.shards[s].local_shape;
      add(s, static_cast<int>(shape[0]), static_cast<int>(shape[1]));
    }
  }
  // The tied LM head, on the last stage (the one with the final LayerNorm):
  // logits = x wte^T, so its W [in, out] is wte^T [h, vocab].
  if (p.wte >= 0 && p.lnf_g >= 0) {
    const auto& shape = p.shards[p.wte].local_shape;  // [vocab, h]
    add(p.wte, static_cast<int>(shape[1]), static_cast<int>(shape[0]));
  }
  buf_.resize(size);
}

void WeightPanels::Pack(const StageParams& p) {
  for (size_t s = 0; s < fwd_.size(); ++s) {
    if (fwd_[s] == kNone) continue;
    const auto& shape = p.shards[s].local_shape;
    const float* w = p.w.data() + p.shards[s].start;
    const int rows = static_cast<int>(shape[0]),
              cols = static_cast<int>(shape[1]);
    if (static_cast<int>(s) == p.wte) {  // stored as W^T [vocab, h]
      PackPanels(w, cols, true, cols, rows, buf_.data() + fwd_[s]);
      PackPanels(w, cols, false, rows, cols, buf_.data() + bwd_[s]);
    } else {  // stored as W [in, out]
      PackPanels(w, cols, false, rows, cols, buf_.data() + fwd_[s]);
      PackPanels(w, cols, true, cols, rows, buf_.data() + bwd_[s]);
    }
  }
}

}  // namespace strata::train
