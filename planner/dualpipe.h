// DeepSeek's DualPipe pipeline schedule (DeepSeek-V3 Technical Report,
// arXiv 2412.19437, §3.2.1 and Table 2), costed when a job pins
// PlanConstraints.dualpipe. Each rank holds two stages (one per direction
// of the bidirectional pipeline) and pairs a forward chunk of one
// micro-batch with a backward chunk of another, so "both all-to-all and PP
// communication can be fully hidden during execution" (§3.2.1).
#pragma once

#include "planner/cost_model_parts.h"

namespace strata::planner {

// Bubble in micro-batch slots (F + B of one micro-batch on one stage).
// Table 2: 1F1B (PP-1)(F+B); DualPipe (PP/2-1)(F&B + B - 3W), with F the
// forward chunk, B the full backward chunk, W its weight-gradient part and
// F&B the two overlapped chunks. With B = 2F and W = F (the backward's
// input and weight gradients cost a forward each) and F&B = F + B (the
// overlap hides communication, not compute): (PP/2-1) 2F, i.e.
// 2 (PP/2-1) / 3 slots of F + B instead of PP - 1.
inline double DualPipeBubbleSlots(int pp) {
  return pp >= 2 ? 2.0 * (pp / 2 - 1) / 3.0 : 0.0;
}

// The MoE all-to-all of a layer (dispatch and combine, forward and
// backward) runs while the paired chunk computes (§3.2.1, Figure 4): hidden
// up to the layer's forward + backward compute, at the usual overlap tax.
inline double DualPipeExposedA2a(double a2a_s, double layer_compute_s) {
  return cost_internal::Exposed(a2a_s, layer_compute_s);
}

}  // namespace strata::planner
