// Memory and time of one training step under a Candidate (docs/planner.md).
// Every formula and constant is cited where it is used and collected in
// docs/planner.md. Pure, but not thread-safe (scratch buffers): one
// CostModel evaluates many candidates from one thread.
#pragma once

#include <memory>
#include <vector>

#include "planner/candidate.h"
#include "planner/model.h"
#include "planner/network.h"
#include "proto/job.pb.h"

namespace strata::planner {

// Memory kept free per GPU when the job does not say (CUDA context and
// cuBLAS workspaces ~1 GiB, NCCL channel buffers ~1-2 GiB, caching-allocator
// fragmentation); an estimate, overridable per job.
inline constexpr double kDefaultReserveGib = 4.0;
// Half-saturation size of a GEMM dimension: a GEMM of M x N x K runs at
// gemm_efficiency * prod(d / (d + kGemmHalfDim)) of peak, modelling tile
// quantisation and low occupancy of small matrices on GPUs
// (docs/planner.md). The GPU default: a GpuType's gemm_half_dim (measured
// by the worker probe for CPU ranks, or fitted by a calibration) replaces
// it.
inline constexpr double kGemmHalfDim = 128;
inline double GemmHalfDim(const GpuType& gpu) {
  return gpu.gemm_half_dim() > 0 ? gpu.gemm_half_dim() : kGemmHalfDim;
}
// Core attention (QK^T, AV batched GEMMs) runs at this fraction of the GEMM
// efficiency (calibrated on Megatron SC'21 Table 1; docs/planner.md).
inline constexpr double kAttentionEfficiency = 0.5;
// FlashAttention-2 reaches 50-73% of A100 peak and FlashAttention-3 75% of
// H100 peak forward, ~10% less backward (Dao 2023 §4.1; Shah et al. 2024):
// about 0.9 of the large-GEMM efficiency.
inline constexpr double kFlashAttentionEfficiency = 0.9;
// PyTorch's scaled_dot_product_attention (torch 2.5-2.6, torchtitan's
// runs; PlanConstraints.sdpa) runs FlashAttention-2, which reaches 35% of
// an H100's peak where FlashAttention-3 reaches 75% (Shah et al. 2024,
// arXiv 2407.08608, abstract and §4.1: FA2 does not use Hopper's wgmma and
// TMA): 0.35 / 0.75 (H100's large-GEMM efficiency) of the GEMM
// efficiency, on GPUs with an FP8 peak (Hopper and later). On earlier
// GPUs FlashAttention-2 is what kFlashAttentionEfficiency stands for.
inline constexpr double kSdpaHopperAttentionEfficiency = 0.35 / 0.75;
// Memory-bound kernels (norms, softmax, dropout, activation functions) move
// each stored activation byte this many times per forward pass (written by
// its producer, read by its consumer).
inline constexpr double kElementwisePasses = 2.0;
// Fraction of overlapped communication time that still lands on the step:
// NCCL runs 8-32 channels, each a thread block on its own SM (~10% of an
// H100's 132 SMs), and competes for HBM bandwidth (docs/planner.md).
inline constexpr double kOverlapTax = 0.1;
// Mixed-precision Adam on a node's CPUs, billion parameters per second,
// when the cluster's host.cpu_adam_gparams is absent: ZeRO-Offload's
// vectorised CPU-Adam (Ren et al. ATC'21 §5.1, Table 3: about 0.25 s per
// billion parameters on a DGX-2 host, 5-7x PyTorch's CPU Adam).
inline constexpr double kDefaultCpuAdamGparams = 4.0;
// Bytes the host keeps per offloaded parameter: fp32 master weights, two
// Adam moments and fp32 gradients (ZeRO-Offload §4.1: "fp32 parameters,
// gradients and optimizer states on CPU"); with NVMe offload the 12 bytes
// of optimizer state live on NVMe and the host keeps the 4 of gradients
// (ZeRO-Infinity, Rajbhandari et al. SC'21 §5).
inline constexpr double kHostGradBytes = 4.0;
// Distinct stage classes (GPU type, NIC link, first/last) the layer split
// tells apart; further classes are merged into the last one.
inline constexpr int kMaxStageClasses = 16;
// Transformer Engine FP8 (docs/planner.md "FP8"): casting a bf16 tensor to
// FP8 reads 2 bytes and writes the FP8 copy and its transpose (Hopper FP8
// GEMMs take only the TN layout), 4 bytes per element
// (transformer_engine cast_transpose).
inline constexpr double kFp8CastBytes = 4;
// Amax history per FP8 tensor (Megatron/NeMo recipes:
// --fp8-amax-history-len 1024), fp32; three tensors (input, weight,
// output gradient) per FP8 GEMM.
inline constexpr double kFp8AmaxHistory = 1024;

struct Evaluation {
  bool valid = false;            // a layer split exists
  bool fits = false;             // every stage fits in its GPU memory
  bool mixed_nic_stage = false;  // some stage spans two NIC fabrics
  double step_s = 0;
  double memory_gib = 0;    // the critical (fullest) stage
  double capacity_gib = 0;  // that stage's GPU memory
  int critical_stage = 0;
  int slowest_stage = 0;
  // Seconds per step on the slowest stage.
  double compute_s = 0, recompute_s = 0, tp_comm_s = 0, cp_comm_s = 0,
         pp_comm_s = 0, bubble_s = 0, dp_comm_s = 0, dp_comm_total_s = 0,
         optimizer_s = 0, a2a_comm_s = 0;
  double a2a_inter_node_fraction = 0;  // MoE all-to-all bytes leaving a node
  // GiB on the critical stage.
  double weights_gib = 0, gradients_gib = 0, optimizer_state_gib = 0,
         activations_gib = 0, logits_gib = 0, zero3_buffers_gib = 0,
         reserve_gib = 0, fp8_buffers_gib = 0, expert_states_gib = 0;
  std::vector<int> layers;  // per pipeline stage
  // Per pipeline stage, what one of its ranks computes per step, not
  // counting collectives, p2p or the bubble: m x (layers x (3 fwd + bwd
  // extra + recompute) + logits on the last) + optimizer. What a rank's
  // step report measures as compute (docs/fault.md, plan vs measured).
  std::vector<double> stage_compute_s;
  // Offload (c.offload != none): exposed host time on the slowest stage
  // and before overlap; host memory and NVMe per node on the fullest node,
  // and whether they fit (`fits` is false when they do not).
  double offload_s = 0, offload_total_s = 0;
  // CPU ranks sharing cores: what the busiest node adds to step_s
  // (CostModel::ShareCores), and of that, its cores' idle time in the 1F1B
  // fill and drain over its cores (FillDrainIdleCoreSeconds).
  double core_sharing_s = 0, fill_drain_s = 0;
  double cpu_gib_per_node = 0, nvme_gib_per_node = 0;
  bool host_fits = true;
};

class CostModel {
 public:
  // `model` must be normalised (NormalizeModel); `net` describes the job's
  // nodes. Both must outlive the CostModel.
  CostModel(const ModelSpec& model, const JobSpec& job, const Network& net);
  ~CostModel();

  // Fills `out` for candidate `c` (whose degrees multiply to the job's
  // GPUs). Not thread-safe (a cache of the last layout). out->valid is false
  // when no layer split gives every stage a layer per virtual stage; the other
  // fields are then unspecified. Without `stage_layers`, out->layers is left
  // empty (the search scores candidates; only reported plans need the per-stage
  // list).
  // A lower bound of Evaluate's step_s for a candidate with a valid split,
  // at a fraction of its cost (the search skips candidates whose bound
  // cannot enter its top K; docs/planner.md "Search"): every stage runs
  // `steps` micro-batch slots of its layers at the mean layer's time, and
  // the slowest holds at least l / p layers. 0 (no bound) when the nodes
  // differ (their layers cost differently).
  double StepLowerBound(const Candidate& c) const;
  void Evaluate(const Candidate& c, Evaluation* out,
                bool stage_layers = true) const;

  int seq_length() const { return seq_; }
  const ModelSpec& model() const { return model_; }
  const Network& network() const { return net_; }
  // Mean peak BF16 TFLOP/s of the job's GPUs (MFU denominator, also under
  // FP8, as NeMo and Megatron report model TFLOP/s).
  double mean_peak_tflops() const { return mean_peak_tflops_; }
  Precision::Kind precision() const { return precision_; }
  const LayerShape& shape() const { return shape_; }
  const ParamCount& params() const { return params_; }

 private:
  // Evaluate runs these steps in order; each is documented next to the
  // formulas it uses, in cost_model.cc (per candidate and stage) or
  // layer_cost.cc (one layer: Layer and its helpers). The steps are
  // declared inline so the compiler folds them back into their one caller
  // in the file that defines them; the structures are in
  // cost_model_parts.h.
  struct Shape;         // per-candidate quantities every step shares
  struct LayerCost;     // per micro-batch, per layer, on one GPU type
  struct StageClass;    // stages on equal links and GPUs, and their layers
  struct StageClasses;  // at most kMaxStageClasses of them
  struct StageGroup {   // stages of one class with equal layers
    int cls, layers, first;
  };
  struct StageCost;  // one pipeline stage

  inline Shape ShapeOf(const Candidate& c) const;
  // Per layer: compute, recompute, TP and CP communication, activations.
  LayerCost Layer(const Candidate& c, const GpuType& gpu) const;
  inline LayerCost CachedLayer(const Candidate& c, const GpuType& gpu) const;
  // bf16 GEMM; Gemm8 runs the layers' GEMMs in the job's precision (FP8
  // at the FP8 peak under precision fp8).
  double Gemm(double m, double n, double k, const GpuType& gpu) const;
  double Gemm8(double m, double n, double k, const GpuType& gpu) const;
  // HBM bytes of a layer's forward that eager mode's unfused kernels move
  // beyond the fused ones (0 unless PlanConstraints.eager).
  double EagerExtraBytes(const Candidate& c, double tokens) const;
  inline double LayerGemmTime(double tokens, double t,
                              const GpuType& gpu) const;
  // MoE layers (mean over layers): shared experts, router, routed experts,
  // token permutation, FP8 casts; and the all-to-all.
  inline void MoeTime(const Candidate& c, double tokens, const GpuType& gpu,
                      LayerCost* lc) const;
  inline double Fp8CastTime(const Candidate& c, double tokens,
                            const GpuType& gpu) const;
  inline double CoreAttentionTime(double tokens, double t,
                                  const GpuType& gpu) const;
  inline double LinearActivationBytes(const Candidate& c, double tokens) const;
  inline double ScoreActivationBytes(const Candidate& c) const;
  inline void ApplyRecompute(const Candidate& c, double tokens, double attn,
                             double act_lin, double act_scores,
                             double elem_scores, LayerCost* lc) const;
  // torchtitan's op-level selective checkpointing (Recompute::selective_op).
  inline void SelectiveOpRecompute(const Candidate& c, double tokens,
                                   const GpuType& gpu, double elementwise_s,
                                   double moe_fwd_s, double act_all,
                                   LayerCost* lc) const;
  inline double TensorParallelTime(const Candidate& c, double tokens) const;
  inline double ContextParallelTime(const Candidate& c, double tokens,
                                    double attn) const;
  // Per stage: classes, parameters, time (pipeline, DP, optimizer), memory.
  inline void ClassifyStages(const Candidate& c, const Shape& sh,
                             StageClasses* classes) const;
  struct StageLayout;
  void GroupStages(const Shape& sh, int group, StageLayout* layout) const;
  struct StagePsi;  // parameters on one GPU: dense and routed experts
  inline StagePsi StageParams(const Candidate& c, bool first, bool last,
                              int layers) const;
  StageCost CostOfStage(const Candidate& c, const Shape& sh,
                        const StageClass& k, int stage, int layers) const;
  inline void DataParallelTime(const Candidate& c, const Shape& sh,
                               const StageClass& k, int layers,
                               const StagePsi& psi, StageCost* sc) const;
  // One data-parallel group's traffic and its exposed part for `psi`
  // parameters on `link` (the group size is in the link).
  inline void GroupDataParallel(const Candidate& c, const Shape& sh,
                                const LayerCost& lc, int layers, double psi,
                                const GroupLink& link, double* total,
                                double* exposed) const;
  // `local`: optimizer-state parameters this GPU keeps (its dense and
  // expert shards).
  inline void OffloadTime(const Candidate& c, const Shape& sh,
                          const StageClass& k, int layers, double local,
                          StageCost* sc) const;
  inline void StageMemory(const Candidate& c, const Shape& sh,
                          const StageClass& k, int stage, int layers,
                          const StagePsi& psi, StageCost* sc) const;
  // Layer split across stages, per class; false when no split is valid.
  inline bool SplitLayers(const Candidate& c, const Shape& sh,
                          StageClasses* classes) const;
  inline double FitStageLines(const Candidate& c, const Shape& sh,
                              StageClasses* classes) const;
  // The split from a first target: each class's most layers under the
  // target (within its min and max), the target raised until l layers are
  // placed, the surplus trimmed. False when no such split exists.
  inline bool BalanceLayers(const Shape& sh, double target,
                            StageClasses* classes) const;
  static inline int64_t TrimSurplus(StageClasses* classes, int64_t surplus);
  // Breakdown of the critical (memory) and slowest (time) stage.
  inline void RecordStages(const Candidate& c, const Shape& sh,
                           const StageClasses& classes, Evaluation* out) const;
  // out->layers from the classes' split.
  inline void StageLayers(const Candidate& c, const Shape& sh,
                          const StageClasses& classes, Evaluation* out) const;
  inline void RecordMemory(const StageClass& k, const StageCost& sc, int stage,
                           Evaluation* out) const;
  // CPU ranks (Network::cpu_cores_per_node > 0): raises out->step_s to the
  // busiest node's work plus its fill-and-drain idle, divided by its cores
  // (core_sharing.cc).
  void ShareCores(const Candidate& c, const Shape& sh,
                  const StageClasses& classes, Evaluation* out) const;
  static inline void RecordTime(const Shape& sh, const StageClass& k,
                                const StageCost& sc, int stage, int layers,
                                Evaluation* out);

  const ModelSpec& model_;
  const Network& net_;
  int seq_;
  int64_t global_batch_;
  double optimizer_bytes_;  // fp32 optimizer state per parameter
  double cpu_adam_params_per_s_;  // per node (HostSpec or the default)
  bool even_layers_;  // PlanConstraints.even_layers: l / p per stage
  bool dualpipe_;     // PlanConstraints.dualpipe: DeepSeek's DualPipe
  bool eager_;        // PlanConstraints.eager: PyTorch eager mode
  bool sdpa_;         // PlanConstraints.sdpa: PyTorch SDPA's attention
  // A split pinned with --fix first/last, embedding_stage/loss_stage or
  // layout (pipeline_layout.h): the constraints, and the layers per stage
  // of the last (p, v) asked (empty: that p, v breaks Megatron's rules).
  bool pinned_split_ = false;
  PlanConstraints split_fix_;
  mutable int pinned_p_ = 0, pinned_v_ = 0;
  mutable std::vector<int> pinned_layers_;
  // Gives each class its pinned layers; false when the pinned split has no
  // valid (p, v) or does not follow the classes (a class's stages hold L,
  // or L - 1 on its earliest ones then L).
  inline bool ApplyPinnedSplit(const Shape& sh, StageClasses* classes) const;
  // Calibration (docs/planner.md "Calibration"): a fixed forward cost per
  // layer per micro-batch (0 unless fitted).
  double layer_overhead_s_;
  double reserve_bytes_;
  double mean_peak_tflops_ = 0;
  ParamCount params_;
  LayerShape shape_;
  Precision::Kind precision_ = Precision::bf16;
  bool fp8_ = false;
  double act_coeff_;  // Korthikanti's 34, generalised
  // The stage classes of the last layout (p, stage ranks, DP x CP group,
  // nodes per stage) ClassifyStages saw: the search enumerates every
  // schedule and option of one layout in a row, and they share it.
  mutable std::unique_ptr<StageLayout> layout_;
  // CachedLayer's recent results.
  struct LayerCache;
  mutable std::unique_ptr<LayerCache> layer_cache_;
};

}  // namespace strata::planner
