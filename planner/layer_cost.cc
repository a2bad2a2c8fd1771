// One layer of one micro-batch on one GPU type (CostModel::Layer): GEMM,
// attention, FP8 casts, MoE experts and all-to-all, recompute, TP and CP
// communication (docs/planner.md "Time per step").
#include <algorithm>
#include <cmath>

#include "planner/cost_model.h"
#include "planner/cost_model_parts.h"
#include "planner/dualpipe.h"
#include "planner/moe_host.h"

namespace strata::planner {

using cost_internal::Exposed;
using cost_internal::kGiB;

double CostModel::Gemm(double m, double n, double k, const GpuType& gpu) const {
  const double hd = GemmHalfDim(gpu);
  const double shape = (m / (m + hd)) * (n / (n + hd)) * (k / (k + hd));
  return 2 * m * n * k /
         (gpu.peak_bf16_tflops() * 1e12 * gpu.gemm_efficiency() * shape);
}

// FP8 GEMMs (E4M3 forward, E5M2 gradients) run at the FP8 tensor-core peak
// (H100 SXM: 1979 dense TFLOP/s, datasheet) at fp8_gemm_efficiency, by
// default the BF16 fraction: cuBLASLt FP8 8192^3 GEMMs reach ~1,600-1,630
// TFLOP/s on H100 SXM (0.81 of peak), at least the fraction BF16 reaches.
double CostModel::Gemm8(double m, double n, double k,
                        const GpuType& gpu) const {
  if (!fp8_) return Gemm(m, n, k, gpu);
  const double hd = GemmHalfDim(gpu);
  const double shape = (m / (m + hd)) * (n / (n + hd)) * (k / (k + hd));
  const double eff = gpu.has_fp8_gemm_efficiency() ? gpu.fp8_gemm_efficiency()
                                                   : gpu.gemm_efficiency();
  return 2 * m * n * k / (gpu.peak_fp8_tflops() * 1e12 * eff * shape);
}

CostModel::LayerCost CostModel::Layer(const Candidate& c,
                                      const GpuType& gpu) const {
  const double h = model_.hidden_size();
  const double V = model_.vocab_size();
  const double s = seq_;
  const double t = c.tp, cp = c.cp, b = c.micro_batch;
  const double tokens = b * s / cp;  // per GPU per micro-batch
  const double hbm = gpu.hbm_gbps() * 1e9;
  const double gemm = LayerGemmTime(tokens, t, gpu);
  const double attn = CoreAttentionTime(tokens, t, gpu);
  const double act_lin = LinearActivationBytes(c, tokens);
  const double act_scores = ScoreActivationBytes(c);
  // Memory-bound kernels move every stored activation byte
  // kElementwisePasses times.
  const double elem_lin =
      kElementwisePasses * act_lin / hbm + EagerExtraBytes(c, tokens) / hbm;
  const double elem_scores = kElementwisePasses * act_scores / hbm;
  LayerCost lc;
  lc.fwd_s = gemm + attn + elem_lin + elem_scores + layer_overhead_s_;
  if (fp8_) lc.fwd_s += Fp8CastTime(c, tokens, gpu);
  // MoE: adds the routed experts' time and the all-to-all; their
  // activations join the linear ones (recompute treats them alike).
  const double before_moe_s = lc.fwd_s;
  if (shape_.experts > 0) MoeTime(c, tokens, gpu, &lc);
  const double moe_fwd_s = lc.fwd_s - before_moe_s;
  const double act_all = act_lin + lc.act_bytes;
  lc.act_bytes = 0;
  // FlashAttention's backward recomputes QK^T and softmax: 2.5x the forward
  // attention FLOPs instead of 2x (Dao 2023, FlashAttention-2 §3.1.2).
  if (model_.attention() == AttentionKernel::flash) lc.bwd_extra_s = 0.5 * attn;
  // MoE host time (moe_host.h): the forward's exposed part joins fwd_s (so
  // recompute repeats it); the backward's replaces the 2x fwd_s share.
  lc.fwd_s += lc.moe_host_fwd_s;
  lc.bwd_extra_s += lc.moe_host_bwd_s - 2 * lc.moe_host_fwd_s;
  ApplyRecompute(c, tokens, attn, act_all, act_scores, elem_scores, &lc);
  if (c.recompute == Recompute::selective_op) {
    SelectiveOpRecompute(c, tokens, gpu, elem_lin, moe_fwd_s, act_all, &lc);
  }
  if (shape_.experts > 0 && (c.recompute == Recompute::full ||
                             c.recompute == Recompute::selective_op)) {
    lc.a2a_s *= 1.5;  // the recomputed forward repeats dispatch and combine
  }
  if (dualpipe_) lc.a2a_s = DualPipeExposedA2a(lc.a2a_s, lc.Compute());
  lc.tp_s = TensorParallelTime(c, tokens);
  // An MoE layer without shared experts has no TP collectives around its
  // MLP: the dispatcher takes the sequence-parallel shard as it is.
  if (shape_.experts > 0 && shape_.shared_ffn == 0) {
    lc.tp_s *= 1 - 0.5 * shape_.moe_fraction;
  }
  lc.cp_s = ContextParallelTime(c, tokens, attn);
  // Stage boundary: SP already shards it; without SP Megatron's
  // scatter/gather optimisation sends 1/t per rank too (Narayanan §4.1).
  lc.p2p_bytes = 2 * tokens * h / t;
  // Output layer: logits GEMM forward + 2x backward, and the fp32 softmax /
  // cross-entropy buffer of 4 s b V / t bytes (Korthikanti §4.3).
  lc.logits_bytes = 4 * tokens * V / t;
  lc.logits_s = 3 * Gemm(tokens, V / t, h, gpu) +
                kElementwisePasses * lc.logits_bytes / hbm;
  // Multi-token prediction (DeepSeek-V3 §2.2; Megatron-core places the
  // MTP block after the decoder on the last stage): per depth the
  // projection of the two normed inputs (2h -> h, column-parallel), one
  // layer (the mean layer) and another pass of the output head with its
  // logits; its layer's activations are kept like the logits, once per
  // micro-batch in flight on the last stage.
  const double mtp = model_.mtp_num_layers();
  if (mtp > 0) {
    const double head_s = lc.logits_s, head_bytes = lc.logits_bytes;
    lc.logits_s += mtp * (3 * Gemm8(tokens, h / t, 2 * h, gpu) + lc.Total() +
                          head_s);
    lc.logits_bytes += mtp * (lc.act_bytes + head_bytes);
  }
  return lc;
}

// PyTorch eager mode (PlanConstraints.eager; torchtitan without
// torch.compile): HBM bytes one layer's forward moves beyond the fused
// kernels the rest of the model assumes (docs/planner.md "Eager mode").
// Counted from torchtitan's Llama code at 9dec370 (the commit of its H100
// table), one read or write per op of each tensor it touches:
// - RMSNorm (models/norms.py, norm_type "rmsnorm": `_norm(x.float())
//   .type_as(x) * weight`, `_norm = x * rsqrt(x.pow(2).mean(-1) + eps)`):
//   to fp32 (2 + 4 bytes per element), pow (4 + 4), mean (4), multiply
//   (4 + 4 + 4), to bf16 (4 + 2), times the weight (2 + 2) = 40 bytes per
//   element where one fused kernel moves 4 (read, write): 36 more, on each
//   of the two norms' h-wide inputs (LayerNorm models alike);
// - RoPE (models/llama/model.py apply_rotary_emb: view_as_complex of
//   `xq.float()`, a complex multiply, view_as_real, type_as): to fp32
//   (2 + 4), multiply (4 + 4), to bf16 (4 + 2) = 20 bytes per element of
//   q and k where a fused kernel moves 4: 16 more on q + kv widths (only
//   with rotary embeddings);
// - SwiGLU (`w2(F.silu(w1(x)) * w3(x))`): silu (2 + 2) and the product
//   (2 + 2 + 2) = 10 bytes per element of f where a fused kernel moves 6:
//   4 more (GELU models: none, the activation is one kernel either way).
// Backward and recompute repeat it like every other memory-bound kernel
// (the backward's 2x). Sequence parallelism shards the norms' tokens by t;
// the attention and MLP widths are split by t.
double CostModel::EagerExtraBytes(const Candidate& c, double tokens) const {
  if (!eager_) return 0;
  const LayerShape& ls = shape_;
  const double t = c.tp;
  const double sp = c.sequence_parallel || c.tp == 1 ? t : 1;
  double bytes = 2 * 36 * ls.h * tokens / sp;
  if (model_.position_embedding() == PositionEmbedding::rope) {
    bytes += 16 * (ls.q_dim + ls.kv_dim) / t * tokens;
  }
  if (model_.activation() == Activation::swiglu) {
    // The dense MLPs, the routed experts' copies and the shared experts.
    const double f = (1 - ls.moe_fraction) * ls.ffn +
                     ls.moe_fraction * (ls.topk * ls.moe_ffn + ls.shared_ffn);
    bytes += 4 * f / t * tokens;
  }
  return bytes;
}

// The four GEMMs of a layer's forward on `tokens` rows: Megatron's
// column/row-parallel split (Shoeybi et al. 2019 §3) of QKV, projection,
// MLP up (gate and up under SwiGLU) and down.
double CostModel::LayerGemmTime(double tokens, double t,
                                const GpuType& gpu) const {
  const double h = model_.hidden_size();
  const double q = shape_.q_dim, kv = shape_.kv_dim;
  const double f = model_.ffn_hidden_size();
  // MLA's five projections are costed as one GEMM of their weights (each
  // has h or a rank of >= 512 as a side, so all are large).
  double gemm =
      shape_.mla ? Gemm8(tokens, shape_.attn_gemm_flops / (2 * h * t), h, gpu)
                 : Gemm8(tokens, (q + 2 * kv) / t, h, gpu) +
                       Gemm8(tokens, h, q / t, gpu);
  double mlp;
  if (model_.activation() == Activation::swiglu) {
    mlp = Gemm8(tokens, 2 * f / t, h, gpu) + Gemm8(tokens, h, f / t, gpu);
  } else {
    mlp = Gemm8(tokens, f / t, h, gpu) + Gemm8(tokens, h, f / t, gpu);
  }
  // MoE models: the dense MLP runs in the dense layers only (MoeTime
  // adds the MoE layers' MLPs).
  if (shape_.experts > 0) mlp *= 1 - shape_.moe_fraction;
  return gemm + mlp;
}

// Transformer Engine casts every FP8 GEMM input (QKV input, projection
// input, MLP input, second MLP GEMM input) from bf16 to FP8 with its
// transpose (kFp8CastBytes per element), a memory-bound pass per forward
// (the backward's output-gradient casts are in its 2x).
double CostModel::Fp8CastTime(const Candidate& c, double tokens,
                              const GpuType& gpu) const {
  const double h = shape_.h, t = c.tp;
  const double fc2_in = (1 - shape_.moe_fraction) * shape_.ffn +
                        shape_.moe_fraction * shape_.shared_ffn;
  const double sp = c.sequence_parallel || c.tp == 1 ? t : 1;
  const double elements = tokens * (2 * h / sp + (shape_.q_dim + fc2_in) / t);
  return kFp8CastBytes * elements / (gpu.hbm_gbps() * 1e9);
}

// MoE layers, scaled by their share of the layers (the cost model's layer
// is the mean layer). Megatron-core MoELayer with the alltoall dispatcher
// under parallel folding (megatron/core/transformer/moe/README.md): the
// layer's input is the sequence-parallel shard, T / t tokens per rank; the
// router (h x E GEMM) picks top-k experts per token; the token copies go
// to their experts' EP rank (all-to-all), are all-gathered across the
// ETP group, run through the rank's E / ep experts (grouped GEMM, weights
// split by etp), and come back (reduce-scatter, all-to-all). Every EP rank
// gets k etp T / t copies when routing is balanced; the busiest gets
// `imbalance` times that, and the layer waits for it. Shared experts run
// as a TP-split dense MLP on every token.
void CostModel::MoeTime(const Candidate& c, double tokens, const GpuType& gpu,
                        LayerCost* lc) const {
  const LayerShape& ls = shape_;
  const double frac = ls.moe_fraction;
  const double h = ls.h, F = ls.moe_ffn, k = ls.topk, E = ls.experts;
  const double t = c.tp, ep = c.ep, etp = c.etp, imb = ls.imbalance;
  const double hbm = gpu.hbm_gbps() * 1e9;
  const double T = tokens / t;               // tokens per rank
  const double copies = k * etp * T * imb;   // token copies per expert rank
  const double local = E / ep;               // experts per rank
  const double per_expert = copies / local;  // rows of each expert GEMM
  double fwd = local * (Gemm8(per_expert, (ls.mlp_mult - 1) * F / etp, h, gpu) +
                        Gemm8(per_expert, h, F / etp, gpu));
  if (ls.shared_ffn > 0) {
    const double S = ls.shared_ffn;
    fwd += Gemm8(tokens, (ls.mlp_mult - 1) * S / t, h, gpu) +
           Gemm8(tokens, h, S / t, gpu);
  }
  fwd += Gemm(T, E, h, gpu);  // router logits (bf16; tiny)
  // Permute and unpermute move every token copy (2h bytes) on dispatch and
  // combine, kElementwisePasses times each.
  fwd += 2 * kElementwisePasses * k * etp * T * imb * 2 * h / hbm;
  if (fp8_) fwd += kFp8CastBytes * copies * (h + F / etp) / hbm;
  const double dense_fwd_s = lc->fwd_s;
  lc->fwd_s += frac * fwd;

  // All-to-all of the token copies (bf16), k T / t per rank, among ep
  // ranks placed tp(etp)-ep-dp-pp: the EP peers are etp apart, so a node
  // holds min(ep, gpn / etp) of them; the bytes to peers in the node go
  // over NVLink, the rest over the GPU's NIC share, concurrently.
  // Dispatch + combine forward, and again backward, not overlapped with
  // compute. (Megatron-core's combined 1F1B, --overlap-moe-expert-parallel-
  // comm, can hide part of it behind an adjacent micro-batch; modelled as
  // hiding all of it up to the compute, it predicted the Qwen3-235B H100
  // run, whose recipe turns it on, 39% too fast, so it is not modelled;
  // docs/planner.md "MoE".)
  const int gpn = net_.gpus_per_node();
  const double bytes = k * T * h * 2 * imb;
  double a2a = 0;
  if (c.ep > 1) {
    const int group = c.ep * c.etp;
    const int r = group <= gpn ? c.ep : std::max(1, gpn / c.etp);
    const int64_t stage_ranks = static_cast<int64_t>(c.tp) * c.cp * c.dp;
    const GroupLink link = net_.Link(
        0, group, r, c.ep, static_cast<int>((stage_ranks + gpn - 1) / gpn));
    const double intra = bytes * (r - 1) / ep / (link.intra_gbps * 1e9);
    const double inter = bytes * (ep - r) / ep / (link.inter_gbps * 1e9);
    a2a = std::max(intra, inter) + (r < c.ep ? kNicLatency : kNvlinkLatency);
    lc->a2a_inter = (ep - r) / ep;
  }
  // ETP: the received copies are all-gathered (dispatch) and their outputs
  // reduce-scattered (combine) inside the ETP group, on NVLink.
  // (An all-gather is half an all-reduce.)
  if (c.etp > 1) a2a += net_.IntraAllReduce(copies * h * 2, c.etp) / 2;
  lc->a2a_s = frac * 4 * a2a;

  // The dropless dispatcher's host synchronisation (moe_host.h): after it
  // the GPU runs the dispatch all-to-all (one `a2a`) while the host issues
  // the expert block, then the block no faster than the host. The
  // backward's host work hides behind the layer's backward GPU time (its
  // compute and its two all-to-alls). DualPipe is DeepSeek's own
  // framework, not Megatron-core's dispatcher.
  if (!dualpipe_) {
    const double host = MoeHostForwardS(local, fp8_);
    const double gpu_s = fwd + a2a;
    lc->moe_host_fwd_s = frac * (MoeBlockForwardS(gpu_s, host) - gpu_s);
    lc->moe_host_bwd_s =
        frac * MoeBackwardHostExposedS(host, dense_fwd_s + fwd + a2a);
  }

  // Activations per rank: each copy's input (2h, after the ETP gather),
  // the expert's first GEMM output and activation (2 mult F / etp), and the
  // combined outputs (2h per copy at the token's rank). FP8 keeps the two
  // GEMM inputs as FP8.
  double act =
      copies * (2 * h + 2 * ls.mlp_mult * F / etp) + k * T * imb * 2 * h;
  if (fp8_) act -= copies * (h + F / etp);
  lc->act_bytes = frac * act;
  // Module recompute (selective, MoE models) drops the activation
  // function's output (2 F / etp per copy) and the two norm outputs (2h
  // each per token of the rank's shard), 1 byte each under FP8, which
  // keeps them as the FP8 inputs of the next GEMMs.
  const double sp = c.sequence_parallel || c.tp == 1 ? t : 1;
  const double width = fp8_ ? 1 : 2;
  lc->module_bytes =
      frac * copies * width * F / etp + 2 * width * h * tokens / sp;
  lc->module_s = kElementwisePasses * lc->module_bytes / hbm;
}

// Core attention, 4 T s w / t FLOPs: each of the rank's queries meets all s
// keys (ring CP; fewer under sliding windows) over the attention width w =
// a (d_qk + d_v) / 2, the width TrainingFlops counts (h for standard
// attention; Qwen3's 32 heads of 128 on h 2048 and MLA's wider heads are
// wider than h). Unfused at kAttentionEfficiency, fused at
// kFlashAttentionEfficiency of the GEMM efficiency (cost_model.h), or
// PyTorch SDPA's FlashAttention-2 on Hopper (kSdpaHopperAttentionEfficiency).
double CostModel::CoreAttentionTime(double tokens, double t,
                                    const GpuType& gpu) const {
  const double h = shape_.attn_width;
  const double s = AttentionKeys(shape_, seq_, true);
  const bool flash = model_.attention() == AttentionKernel::flash;
  double eff = flash ? kFlashAttentionEfficiency : kAttentionEfficiency;
  if (flash && sdpa_ && gpu.peak_fp8_tflops() > 0) {
    eff = kSdpaHopperAttentionEfficiency;
  }
  return 4 * tokens * s * h / t /
         (gpu.peak_bf16_tflops() * 1e12 * gpu.gemm_efficiency() * eff);
}

// Activation bytes of a layer without the attention scores (Korthikanti
// Table 2, with sequence parallelism so every term divides by t). Without
// sequence parallelism the norms, dropouts and the inputs of the QKV and MLP
// GEMMs (10 s b h) are replicated on every TP rank (Korthikanti Table 2:
// s b h (10 + 24/t + 5 a s/(h t))).
double CostModel::LinearActivationBytes(const Candidate& c,
                                        double tokens) const {
  const double h = model_.hidden_size();
  const double t = c.tp;
  return c.sequence_parallel || c.tp == 1
             ? tokens * h * act_coeff_ / t
             : tokens * h * (10 + (act_coeff_ - 10) / t);
}

// The attention-score term 5 a s^2 b / t (Korthikanti Table 2), which fused
// attention never writes to HBM (Dao et al. 2022). Per score: softmax output
// (2), dropout mask (1) and output (2); without dropout only the softmax
// output.
double CostModel::ScoreActivationBytes(const Candidate& c) const {
  if (model_.attention() == AttentionKernel::flash) return 0;
  const double a = model_.num_attention_heads();
  const double s = seq_;
  const double t = c.tp, cp = c.cp, b = c.micro_batch;
  // A windowed layer keeps scores of its window only.
  const double keys = AttentionKeys(shape_, s, false);
  return (model_.dropout() ? 5 : 2) * b * (a / t) * (s / cp) * keys;
}

// What the recompute mode adds to the time and keeps in memory
// (Korthikanti §5: full keeps the layer input, selective drops the scores).
void CostModel::ApplyRecompute(const Candidate& c, double tokens, double attn,
                               double act_lin, double act_scores,
                               double elem_scores, LayerCost* lc) const {
  const double h = model_.hidden_size();
  const double t = c.tp;
  const bool flash = model_.attention() == AttentionKernel::flash;
  switch (c.recompute) {
    case Recompute::full:
      lc->recompute_s = lc->fwd_s;
      // Layer input, sharded along the sequence under SP.
      lc->act_bytes = 2 * tokens * h / (c.sequence_parallel ? t : 1);
      lc->work_bytes = act_lin + act_scores;
      break;
    case Recompute::selective:
      // Core attention only; with fused attention there is nothing left
      // to recompute (the kernel already does it) and nothing to save.
      lc->recompute_s = flash ? 0 : attn + elem_scores;
      lc->act_bytes = act_lin;
      // MoE models: also the output-discarding recompute of the experts'
      // activation function and the norms (Megatron-core moe/README.md
      // "Checkpointing"): memory-bound kernels, rerun in the backward.
      if (shape_.experts > 0) {
        lc->act_bytes -= lc->module_bytes;
        lc->recompute_s += lc->module_s;
      }
      break;
    default:
      lc->act_bytes = act_lin + act_scores;
  }
}

// torchtitan's op-level selective activation checkpointing
// (selective_ac_option "op"; torchtitan/parallelisms/parallelize_llama.py
// at 9dec370, the version of its H100 performance table): under
// torch.utils.checkpoint's selective policy the ops in `_save_list`
// (aten.mm except every second one of a block's forward, SDPA, the
// reduce-scatter of sequence parallelism, abs and max) keep their outputs
// and every other op is rerun in the backward. Recomputed per layer:
// - GEMMs (SelectiveOpRecomputedGemmFlops): wk, wo and w3 (GELU: w2) in
//   bf16; every linear under Float8, whose torch._scaled_mm is not in the
//   list, with its input casts; an MoE layer's experts (grouped GEMMs) and
//   routing whole;
// - every memory-bound kernel (norms, RoPE, SiLU and product, residuals):
//   the layer's elementwise time;
// and kept (bytes per token, split by t under sequence parallelism): the
// layer input (2h, the checkpoint's), SDPA's output (2q) and the saved mm
// outputs, bf16: wq (2q), wv (2kv), w1 (2f), w2 (2h; SwiGLU only, GELU's
// second mm is w2 itself); Float8: no mm output but the abs() of each
// linear input that torchao's dynamic scaling reduces (wq, wk, wv: 3h; wo:
// q; w1, w3: 2h; w2: f; bf16). The MoE layers keep only their input and
// attention terms. Working memory: one layer's full set, as under full.
void CostModel::SelectiveOpRecompute(const Candidate& c, double tokens,
                                     const GpuType& gpu, double elementwise_s,
                                     double moe_fwd_s, double act_all,
                                     LayerCost* lc) const {
  const LayerShape& ls = shape_;
  const double h = ls.h, q = ls.q_dim, kv = ls.kv_dim, f = ls.ffn;
  const double t = c.tp, frac = ls.moe_fraction;
  const bool swiglu = model_.activation() == Activation::swiglu;
  double gemm;
  if (fp8_) {
    gemm = LayerGemmTime(tokens, t, gpu) + Fp8CastTime(c, tokens, gpu);
  } else {
    const double attn =
        shape_.mla ? Gemm(tokens, ls.attn_gemm_flops / (2 * h * t), h, gpu) / 2
                   : Gemm(tokens, kv / t, h, gpu) + Gemm(tokens, h, q / t, gpu);
    gemm = attn + (1 - frac) * Gemm(tokens, f / t, h, gpu);
  }
  lc->recompute_s = gemm + moe_fwd_s + elementwise_s;
  double kept;  // bytes per token
  const double dense_share = 1 - frac;
  if (fp8_) {
    kept = 2 * h + 2 * q +
           2 * (3 * h + q + dense_share * ((swiglu ? 2 : 1) * h + f));
  } else {
    kept = 2 * h + 2 * q + 2 * q + 2 * kv +
           dense_share * (2 * f + (swiglu ? 2 * h : 0));
  }
  const double sp = c.sequence_parallel || c.tp == 1 ? t : 1;
  lc->act_bytes = tokens * kept / sp;
  lc->work_bytes = act_all;
}

// TP: per layer 2 all-reduce-equivalents forward and 2 backward of the
// b s h activation (Narayanan §3.2; with SP each becomes an all-gather +
// reduce-scatter pair of the same volume, Korthikanti §4.2.2); full
// recompute repeats the forward pair.
double CostModel::TensorParallelTime(const Candidate& c, double tokens) const {
  if (c.tp <= 1) return 0;
  const double h = model_.hidden_size();
  // Op-level selective recompute (torchtitan) reruns the forward's two
  // all-gathers; its reduce-scatters are in the save list.
  const int n =
      c.recompute == Recompute::full || c.recompute == Recompute::selective_op
          ? 6
          : 4;
  return n * net_.IntraAllReduce(2 * tokens * h, c.tp);
}

// CP: ring attention passes K and V chunks around the c ranks, c-1 steps
// forward and twice that backward (K/V and their gradients), overlapped
// with the attention compute (Liu et al. 2023, Ring Attention; Megatron
// context parallelism). Returns the exposed part.
double CostModel::ContextParallelTime(const Candidate& c, double tokens,
                                      double attn) const {
  if (c.cp <= 1) return 0;
  const double h = model_.hidden_size();
  const double kv =
      h * model_.num_query_groups() / model_.num_attention_heads();
  const double t = c.tp;
  const double chunk = 2 * tokens * kv / t * 2;
  const double steps = (c.cp - 1) * (c.recompute == Recompute::full ? 4 : 3);
  const int gpn = net_.gpus_per_node();
  const bool crosses = c.tp * c.cp > gpn;
  const int64_t stage_ranks = static_cast<int64_t>(c.tp) * c.cp * c.dp;
  const GroupLink link =
      net_.Link(0, static_cast<int64_t>(c.tp) * c.cp,
                std::max(1, gpn / std::max(1, c.tp)), c.cp,
                static_cast<int>((stage_ranks + gpn - 1) / gpn));
  const double comm = steps * net_.P2P(chunk, crosses, link);
  const double overlap = attn * (c.recompute == Recompute::full ? 4 : 3);
  return Exposed(comm, overlap);
}

// ---------------------------------------------------------------------------
// Per pipeline stage.

}  // namespace strata::planner
