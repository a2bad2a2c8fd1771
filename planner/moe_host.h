// Host time of an MoE layer's expert block under Megatron-core's dropless
// token dispatchers (docs/planner.md "MoE: the host-bound expert block").
//
// Mechanism (cited): the dropless alltoall dispatcher copies the
// tokens-per-expert counts to the host and synchronises the stream before
// the expert-parallel all-to-all, "to get the `input_splits` and
// `output_splits` CPU values" (Megatron-LM megatron/core/transformer/moe/
// token_dispatcher.py, MoEAlltoAllTokenDispatcher.preprocess, sync point
// "before_ep_alltoall"; "before_finish" without EP), and the grouped GEMM
// takes those counts as host-side m_splits. So at every MoE layer's
// forward the host cannot have queued work ahead of the GPU: after the sync
// the GPU runs the expert block only as fast as the host issues it.
// Megatron-core's MoE report names this "host-boundedness" of small expert
// GEMMs (arXiv 2603.07685, "Three Walls": compute-efficiency wall, "small
// expert GEMMs + host overhead", also in Megatron-Bridge
// docs/training/moe-optimization.md), and NVIDIA measured what removing
// the synchronisation gains end to end: +93% for GPT-OSS, +8% for
// DeepSeek-V3 ("Boosting MoE Training Throughput with Advanced Fusion
// Kernels", NVIDIA developer blog, 2026-06-15).
//
// Model: after the sync the GPU runs the dispatch all-to-all (issued
// first) while the host issues the expert block, so the all-to-all and the
// block together take max(their GPU time, host time), the host time being
// the per-expert operations Transformer Engine's GroupedLinear issues one
// expert at a time, times a host time per operation; recompute repeats
// it. Counted from TE's transformer_engine/pytorch/module/grouped_linear.py
// (_GroupedLinear.forward): general_grouped_gemm issues one cuBLAS GEMM
// per expert (on several streams), so each of the two expert linears
// costs one operation per expert; under FP8 each linear also quantises its
// input per expert (tex.fused_multi_quantize, one cast per split) and
// takes a per-expert weight workspace, counted as one more operation per
// expert and linear. The backward (dgrad and wgrad per expert GEMM) issues
// twice the forward's operations but has no synchronisation (the split sizes
// are already on the host), so the host can run ahead there: the backward waits
// only for what twice the host time exceeds the whole layer's backward GPU time
// (twice its forward compute and one all-to-all).
#pragma once

#include <algorithm>

namespace strata::planner {

// Host time per per-expert operation (s). NOT from a source: calibrated on
// one published row, Megatron-Bridge's GPT-OSS-120B on 64 H100 (NeMo 26.02,
// BF16, pp4 ep8 mbs 1, 16 local experts: [B26] in published_moe_fp8_test),
// the row whose GPU work per expert is smallest. Every other published row
// is held out (docs/results.md "Planner", "Outliers, fourth round"). It
// stands for all the host work per expert (Python, Transformer Engine's
// per-expert setup and its launches), not for a kernel launch alone.
inline constexpr double kMoeHostOpS = 151e-6;

// Operations the host issues per local expert in one MoE layer's forward:
// the two expert GEMMs, plus their inputs' per-expert FP8 quantisation.
inline double MoeHostOpsPerLocalExpert(bool fp8) { return fp8 ? 4.0 : 2.0; }

// Host time of one MoE layer's expert block, forward, one micro-batch.
inline double MoeHostForwardS(double local_experts, bool fp8) {
  return local_experts * MoeHostOpsPerLocalExpert(fp8) * kMoeHostOpS;
}

// The dispatch all-to-all and the block, forward, when the host cannot run
// ahead of them (`gpu_s`: their GPU time).
inline double MoeBlockForwardS(double gpu_s, double host_s) {
  return std::max(gpu_s, host_s);
}

// Host time one layer's backward waits for: twice the forward's host work,
// less the layer's backward GPU time (twice `layer_gpu_fwd_s`, the layer's
// forward compute and one all-to-all).
inline double MoeBackwardHostExposedS(double host_fwd_s,
                                      double layer_gpu_fwd_s) {
  return std::max(0.0, 2 * host_fwd_s - 2 * layer_gpu_fwd_s);
}

}  // namespace strata::planner
