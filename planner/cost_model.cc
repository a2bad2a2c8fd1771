#include "planner/cost_model.h"

#include <algorithm>
#include <array>
#include <cmath>

#include "planner/cost_model_parts.h"
#include "planner/dualpipe.h"
#include "planner/pipeline_layout.h"

namespace strata::planner {

using cost_internal::Exposed;
using cost_internal::kGiB;

CostModel::CostModel(const ModelSpec& model, const JobSpec& job,
                     const Network& net)
    : model_(model), net_(net) {
  seq_ = job.seq_length() > 0 ? job.seq_length() : model.seq_length();
  global_batch_ = job.global_batch();
  // Mixed-precision Adam keeps fp32 master weights and two moments
  // (12 bytes/param); SGD with momentum keeps master + momentum (8)
  // [Rajbhandari et al. SC'20 §3.1].
  optimizer_bytes_ = job.optimizer() == Optimizer::sgd ? 8 : 12;
  even_layers_ = job.constraints().even_layers();
  dualpipe_ = job.constraints().dualpipe();
  eager_ = job.constraints().eager();
  sdpa_ = job.constraints().sdpa();
  split_fix_ = job.constraints();
  pinned_split_ = split_fix_.has_first_stage_layers() ||
                  split_fix_.has_last_stage_layers() ||
                  split_fix_.account_for_embedding() ||
                  split_fix_.account_for_loss() ||
                  split_fix_.has_pipeline_layout();
  const Calibration& cal = net.calibration();
  layer_overhead_s_ = cal.layer_overhead_s();
  cpu_adam_params_per_s_ =
      (net.host().cpu_adam_gparams() > 0 ? net.host().cpu_adam_gparams()
                                         : kDefaultCpuAdamGparams) *
      1e9;
  reserve_bytes_ = (job.constraints().has_memory_reserve_gib()
                        ? job.constraints().memory_reserve_gib()
                        : kDefaultReserveGib) *
                   kGiB;
  params_ = CountParameters(model, seq_);
  shape_ = ShapeOfLayers(model);
  precision_ = EffectivePrecision(model, job);
  fp8_ = precision_ == Precision::fp8;
  double sum = 0;
  for (const auto& n : net.nodes()) sum += n.gpu->peak_bf16_tflops();
  mean_peak_tflops_ = sum / std::max<size_t>(1, net.nodes().size());
  // Korthikanti et al. (MLSys'23) Table 2: 34 s b h bytes per layer for GPT
  // = attention 11 (QKV input 2, Q 2, K 2, V 2, projection input 2, dropout
  // mask 1) + MLP 19 (input 2, up 8, activation 8, mask 1) + norms 4.
  // Generalised: K and V shrink to kv/h under GQA, the MLP terms scale with
  // f/h, and SwiGLU keeps gate and up outputs (4 f/h) plus the product
  // (2 f/h): 14 + 4 kv/h + (4 or 6) f/h. Models trained without dropout
  // (Llama) keep neither 1-byte mask: 12 + ...
  const double h = model.hidden_size();
  const double kv = h * model.num_query_groups() / model.num_attention_heads();
  const double f_over_h = model.ffn_hidden_size() / h;
  const double mlp_act = model.activation() == Activation::swiglu ? 6 : 4;
  const LayerShape& ls = shape_;
  if (!ls.mla && ls.q_dim == h && ls.experts == 0) {
    act_coeff_ = (model.dropout() ? 14 : 12) + 4 * kv / h + mlp_act * f_over_h;
  } else {
    // The attention's 2h (Q) + 2kv + 2kv + 2h (projection input) become
    // the actual widths (kv_channels, MLA's per-head K and V); the MLP
    // terms are the dense layers' share, plus the shared experts of the
    // MoE layers (routed experts: MoeTime, per candidate).
    const double q_width = ls.mla ? ls.k_width : ls.q_dim;
    act_coeff_ = (model.dropout() ? 10 : 8) +
                 2 * (q_width + ls.k_width + ls.v_width + ls.q_dim) / h +
                 (1 - ls.moe_fraction) * mlp_act * f_over_h +
                 ls.moe_fraction * mlp_act * ls.shared_ffn / h;
  }
  if (fp8_) {
    // Transformer Engine keeps the inputs of its FP8 GEMMs for the weight
    // gradient as FP8 (1 byte instead of 2): QKV input, projection input,
    // MLP input and the MLP's second GEMM input (TE Linear/LayerNormMLP
    // save the FP8-cast input; docs/planner.md "FP8").
    const double fc2_in =
        (1 - ls.moe_fraction) * f_over_h + ls.moe_fraction * ls.shared_ffn / h;
    act_coeff_ -= 2 + ls.q_dim / h + fc2_in;
  }
}

// Evaluate = shape -> stage classes (with their per-layer costs) -> layer
// split -> exact cost of every stage, recorded for the critical stages.
void CostModel::Evaluate(const Candidate& c, Evaluation* out,
                         bool stage_layers) const {
  const Shape sh = ShapeOf(c);
  StageClasses classes;
  ClassifyStages(c, sh, &classes);
  out->layers.clear();
  if (!SplitLayers(c, sh, &classes)) {
    out->valid = false;
    return;
  }
  RecordStages(c, sh, classes, out);
  if (stage_layers) StageLayers(c, sh, classes, out);
}

// Evaluate's step is the slowest stage's steps x mb_s plus non-negative
// terms, mb_s = L_i x lc.Total() plus non-negative terms (CostOfStage),
// with sum L_i = l; on identical nodes every class has the same lc.
double CostModel::StepLowerBound(const Candidate& c) const {
  if (!net_.identical_nodes() || net_.nodes().empty()) return 0;
  const Shape sh = ShapeOf(c);
  const LayerCost lc = CachedLayer(c, *net_.nodes()[0].gpu);
  return sh.steps * lc.Total() * sh.l / sh.p;
}

CostModel::~CostModel() = default;

CostModel::Shape CostModel::ShapeOf(const Candidate& c) const {
  Shape sh;
  sh.p = c.pp;
  sh.v = c.vpp;
  sh.l = model_.num_layers();
  sh.gpn = net_.gpus_per_node();
  sh.stage_ranks = static_cast<int64_t>(c.tp) * c.cp * c.dp;
  sh.m = c.num_microbatches;
  sh.steps = sh.m + (dualpipe_ ? DualPipeBubbleSlots(sh.p)
                               : static_cast<double>(sh.p - 1) / sh.v);
  sh.dshard = static_cast<double>(c.dp) * c.cp;
  sh.eshard = static_cast<double>(c.ExpertDp());
  sh.sharded_optimizer = c.zero_stage >= 1 || c.distributed_optimizer;
  sh.grad_bytes = c.distributed_optimizer ? 4 : 2;
  sh.dp_per_node = std::max(1, sh.gpn / std::max(1, c.tp));
  sh.stage_nodes = static_cast<int>((sh.stage_ranks + sh.gpn - 1) / sh.gpn);
  return sh;
}

// ---------------------------------------------------------------------------
// Per layer, per micro-batch, on one GPU of type `gpu`.

// Layer() reads of a candidate only tp, cp, dp (the CP ring's link),
// micro_batch, recompute and sequence_parallel; the search varies recompute
// fastest within a micro-batch, so a few recent results are kept.
CostModel::LayerCost CostModel::CachedLayer(const Candidate& c,
                                            const GpuType& gpu) const {
  if (layer_cache_ == nullptr) layer_cache_ = std::make_unique<LayerCache>();
  LayerCache& cache = *layer_cache_;
  const LayerKey key{&gpu,
                     c.tp,
                     c.cp,
                     c.dp,
                     c.ep,
                     c.etp,
                     c.micro_batch,
                     static_cast<int>(c.recompute),
                     c.sequence_parallel};
  for (const auto& [k, lc] : cache.entries) {
    if (k == key) return lc;
  }
  const LayerCost lc = Layer(c, gpu);
  cache.entries[cache.next] = {key, lc};
  cache.next = (cache.next + 1) % cache.entries.size();
  return lc;
}

// Groups the p stages by their DP x CP group's links and GPU, first/last
// position; each class gets its per-layer cost once. The grouping depends
// only on the layout, so it is kept for the next candidate of the same
// layout (layout_), and only the per-layer costs are computed again.
void CostModel::ClassifyStages(const Candidate& c, const Shape& sh,
                               StageClasses* classes) const {
  if (layout_ == nullptr) layout_ = std::make_unique<StageLayout>();
  StageLayout& lay = *layout_;
  const int group = c.dp * c.cp;
  if (lay.p != sh.p || lay.stage_ranks != sh.stage_ranks ||
      lay.dp_per_node != sh.dp_per_node || lay.group != group ||
      lay.stage_nodes != sh.stage_nodes) {
    lay.p = sh.p;
    lay.stage_ranks = sh.stage_ranks;
    lay.dp_per_node = sh.dp_per_node;
    lay.group = group;
    lay.stage_nodes = sh.stage_nodes;
    GroupStages(sh, group, &lay);
  }
  classes->size = lay.classes.size;
  for (int k = 0; k < classes->size; ++k) {
    StageClass& cl = classes->at[k];
    cl = lay.classes.at[k];
    cl.lc = CachedLayer(c, *cl.link.gpu);
  }
}

void CostModel::GroupStages(const Shape& sh, int group,
                            StageLayout* lay) const {
  StageClasses& classes = lay->classes;
  classes.size = 0;
  lay->stage_class.assign(sh.p, 0);
  // When all nodes are identical every stage's link is stage 0's but for
  // the oversubscription it meets: one Link, then per stage only that (the
  // same arithmetic as Link, so the same bits).
  const bool same_nodes = net_.identical_nodes();
  GroupLink link =
      net_.Link(0, sh.stage_ranks, sh.dp_per_node, group, sh.stage_nodes);
  for (int i = 0; i < sh.p; ++i) {
    if (same_nodes) {
      const auto [a, b] = net_.NodeSpan(i * sh.stage_ranks, sh.stage_ranks);
      link.inter_gbps =
          link.nic_gbps / net_.Oversubscription(a, b, sh.stage_nodes);
    } else if (i > 0) {
      link = net_.Link(i * sh.stage_ranks, sh.stage_ranks, sh.dp_per_node,
                       group, sh.stage_nodes);
    }
    const bool first = i == 0, last = i == sh.p - 1;
    int k = 0;
    for (; k < classes.size; ++k) {
      const StageClass& cl = classes.at[k];
      if (cl.first == first && cl.last == last && cl.link.gpu == link.gpu &&
          cl.link.inter_gbps == link.inter_gbps &&
          cl.link.nodes == link.nodes) {
        break;
      }
    }
    if (k == classes.size) {
      if (classes.size == kMaxStageClasses) {
        k = classes.size - 1;  // merge the rest
      } else {
        StageClass& cl = classes.at[classes.size++];
        cl = StageClass();
        cl.link = link;
        cl.first = first;
        cl.last = last;
      }
    }
    ++classes.at[k].count;
    lay->stage_class[i] = k;
  }
  lay->positions.assign(classes.size, {});
  for (int i = 0; i < sh.p; ++i)
    lay->positions[lay->stage_class[i]].push_back(i);
}

// Parameters on one GPU of a stage with `layers` layers.
CostModel::StagePsi CostModel::StageParams(const Candidate& c, bool first,
                                           bool last, int layers) const {
  StagePsi psi;
  const double dense_layer = params_.per_layer - params_.expert_per_layer;
  double params = layers * dense_layer;
  if (fp8_) psi.layer_dense = params / c.tp;
  if (first) params += params_.embedding + params_.position;
  if (last) {
    // Untied output layer, or Megatron's copy of the tied embedding on the
    // last stage when p > 1 (Shoeybi et al. 2019).
    params += params_.output > 0 ? params_.output
                                 : (c.pp > 1 ? params_.embedding : 0);
    params += params_.final_norm;
    // Multi-token-prediction modules live on the last stage (their routed
    // experts, as the mean layer's, shard like the others').
    params += params_.mtp - model_.mtp_num_layers() * params_.expert_per_layer;
  }
  psi.dense = params / c.tp;
  if (params_.expert_per_layer > 0) {
    const double mtp = last ? model_.mtp_num_layers() : 0;
    psi.expert = (layers + mtp) * params_.expert_per_layer / (c.ep * c.etp);
  }
  return psi;
}

// Time and memory of stage `stage` of class `k` holding `layers` layers.
// Step time of a stage = pipeline (m + (p-1)/v micro-batch slots, Narayanan
// §2.2) + exposed DP traffic + optimizer step.
CostModel::StageCost CostModel::CostOfStage(const Candidate& c, const Shape& sh,
                                            const StageClass& k, int stage,
                                            int layers) const {
  StageCost sc;
  const LayerCost& lc = k.lc;
  const bool crosses = sh.stage_ranks >= sh.gpn;
  double p2p =
      sh.p > 1 ? 2.0 * sh.v * net_.P2P(lc.p2p_bytes, crosses, k.link) : 0.0;
  // DualPipe hides the PP communication behind the paired chunks' compute
  // (DeepSeek-V3 report §3.2.1).
  if (dualpipe_) p2p = Exposed(p2p, layers * lc.Compute());
  sc.mb_s = layers * lc.Total() + (k.last ? lc.logits_s : 0) + p2p;
  sc.pipeline_s = sh.steps * sc.mb_s;
  const StagePsi psi = StageParams(c, k.first, k.last, layers);
  DataParallelTime(c, sh, k, layers, psi, &sc);
  // Optimizer step is memory bound: Adam reads and writes master weights
  // and moments, reads gradients and writes 16-bit weights. Offloaded, it
  // runs on the host instead (OffloadTime).
  double local = sh.sharded_optimizer ? psi.dense / sh.dshard : psi.dense;
  if (psi.expert > 0) {
    local += sh.sharded_optimizer ? psi.expert / sh.eshard : psi.expert;
  }
  const double hbm = k.link.gpu->hbm_gbps() * 1e9;
  if (c.offload == Offload::none) {
    sc.optimizer_s = local * (2 * optimizer_bytes_ + sh.grad_bytes + 2) / hbm;
  } else {
    OffloadTime(c, sh, k, layers, local, &sc);
  }
  // FP8: Transformer Engine casts the layers' weights to FP8 (and their
  // transposes) once per step, on the first micro-batch.
  if (fp8_) {
    sc.optimizer_s += kFp8CastBytes * (psi.layer_dense + psi.expert) / hbm;
  }
  sc.time_s =
      sc.pipeline_s + sc.dp_exposed_s + sc.optimizer_s + sc.offload_exposed_s;
  StageMemory(c, sh, k, stage, layers, psi, &sc);
  return sc;
}

// Data-parallel traffic of a stage's `psi` parameters (ZeRO paper §5 and §7
// for volumes; overlap as in PyTorch DDP / Megatron --overlap-grad-reduce:
// gradients of the last micro-batch are reduced while its backward runs;
// parameters gathered during the forward). Sets dp_total_s, dp_exposed_s.
void CostModel::DataParallelTime(const Candidate& c, const Shape& sh,
                                 const StageClass& k, int layers,
                                 const StagePsi& psi, StageCost* sc) const {
  if (sh.dshard > 1) {
    GroupDataParallel(c, sh, k.lc, layers, psi.dense, k.link, &sc->dp_total_s,
                      &sc->dp_exposed_s);
  }
  // Routed experts reduce over their own data-parallel group, t c d /
  // (ep etp) ranks placed tp(etp)-ep-dp-pp: members are ep etp ranks apart.
  if (psi.expert > 0 && sh.eshard > 1) {
    GroupLink link = k.link;
    const int spacing = c.ep * c.etp;
    const int per_node = std::max(1, sh.gpn / spacing);
    link.members_per_node =
        static_cast<int>(std::min<double>(per_node, sh.eshard));
    link.nodes =
        std::max(1, static_cast<int>(sh.eshard) / link.members_per_node);
    double total = 0, exposed = 0;
    GroupDataParallel(c, sh, k.lc, layers, psi.expert, link, &total, &exposed);
    sc->dp_total_s += total;
    sc->dp_exposed_s += exposed;
  }
}

void CostModel::GroupDataParallel(const Candidate& c, const Shape& sh,
                                  const LayerCost& lc, int layers, double psi,
                                  const GroupLink& link, double* total,
                                  double* exposed) const {
  const double m = sh.m;
  const double fwd_window = layers * lc.fwd_s;
  const double bwd_window = layers * (2 * lc.fwd_s + lc.recompute_s);
  // --fp8-param-gather (FP8 with the distributed optimizer): the weights
  // are all-gathered as FP8, 1 byte each (embeddings stay bf16; ignored).
  const double weight_bytes = fp8_ && c.distributed_optimizer ? 1 : 2;
  const double grads = psi * sh.grad_bytes, weights = psi * weight_bytes;
  if (c.zero_stage == 0 && !c.distributed_optimizer) {
    *total = Network::AllReduce(grads, link);
    *exposed = Exposed(*total, bwd_window);
  } else if (c.zero_stage <= 1) {
    const double rs = Network::ReduceScatter(grads, link);
    const double ag = Network::AllGather(weights, link);
    *total = rs + ag;
    *exposed = Exposed(rs, bwd_window) + Exposed(ag, fwd_window);
  } else if (c.zero_stage == 2) {
    // Partitioned gradients are reduced after every micro-batch.
    const double rs = Network::ReduceScatter(grads, link);
    const double ag = Network::AllGather(weights, link);
    *total = m * rs + ag;
    *exposed = m * Exposed(rs, bwd_window) + Exposed(ag, fwd_window);
  } else {
    // ZeRO-3 gathers parameters for the forward, the backward (and the
    // recompute) and reduce-scatters gradients, every micro-batch.
    const double gathers = c.recompute == Recompute::full ? 3 : 2;
    const double per_mb = gathers * Network::AllGather(weights, link) +
                          Network::ReduceScatter(grads, link);
    *total = m * per_mb;
    *exposed = m * Exposed(per_mb, layers * lc.Total());
  }
}

// Offloaded optimizer step of a GPU holding `local` parameters' optimizer
// state, as ZeRO-Offload schedules it (Ren et al. ATC'21 §4.1, Fig. 5):
// 1. gradients go to the host over PCIe as the backward produces them
//    (`sh.grad_bytes` per parameter), hidden behind the last micro-batch's
//    backward like the DP reduction;
// 2. the host runs Adam on the node's parameters, gpus_per_node x local,
//    at host.cpu_adam_gparams; with NVMe offload the optimizer states are
//    read and written back (2 x optimizer bytes per parameter at
//    host.nvme_gbps), in chunks pipelined with the CPU step (ZeRO-Infinity
//    §6.2, overlap-centric design), so the slower of the two counts;
// 3. the updated 16-bit weights return over PCIe, chunk by chunk while
//    later chunks are updated (overlapped with step 2).
// Not modelled: ZeRO-Offload's delayed parameter update (§4.3), which
// overlaps the CPU step with the next step's forward and backward at the
// price of one step of staleness; strata predicts the synchronous
// schedule that DeepSpeed and Megatron-core run by default.
void CostModel::OffloadTime(const Candidate& c, const Shape& sh,
                            const StageClass& k, int layers, double local,
                            StageCost* sc) const {
  const HostSpec& host = net_.host();
  const LayerCost& lc = k.lc;
  const double pcie = host.pcie_gbps() * 1e9;
  const double node_params = local * sh.gpn;
  const bool nvme = c.offload == Offload::nvme;
  const double d2h = local * sh.grad_bytes / pcie;
  const double bwd_window = layers * (2 * lc.fwd_s + lc.recompute_s);
  const double adam = node_params / cpu_adam_params_per_s_;
  const double disk =
      nvme ? 2 * optimizer_bytes_ * node_params / (host.nvme_gbps() * 1e9) : 0;
  const double h2d = local * 2 / pcie;
  sc->offload_total_s = d2h + adam + disk + h2d;
  sc->offload_exposed_s =
      Exposed(d2h, bwd_window) + std::max({adam, disk, h2d});
  sc->host_bytes =
      node_params * (kHostGradBytes + (nvme ? 0 : optimizer_bytes_));
  sc->nvme_bytes = nvme ? node_params * optimizer_bytes_ : 0;
}

// Memory of a stage (Rajbhandari et al. SC'20 §3.1 and Table 1; Megatron
// distributed optimizer: 2 + 4 + 12/d bytes per parameter), activations of
// the micro-batches in flight, logits on the last stage, ZeRO-3 buffers.
void CostModel::StageMemory(const Candidate& c, const Shape& sh,
                            const StageClass& k, int stage, int layers,
                            const StagePsi& psi, StageCost* sc) const {
  const LayerCost& lc = k.lc;
  const double d = psi.dense, e = psi.expert;
  // Routed experts shard over their own data-parallel group (eshard).
  double ew = 0, eg = 0, eo = 0;
  if (e > 0) {
    ew = (c.zero_stage >= 3 ? e / sh.eshard : e) * 2;
    eg = c.distributed_optimizer ? e * 4
                                 : (c.zero_stage >= 2 ? e / sh.eshard : e) * 2;
    // Offloaded optimizer states live on the host (OffloadTime).
    eo = c.offload != Offload::none
             ? 0
             : (sh.sharded_optimizer ? e / sh.eshard : e) * optimizer_bytes_;
  }
  sc->weights = (c.zero_stage >= 3 ? d / sh.dshard : d) * 2 + ew;
  sc->grads =
      (c.distributed_optimizer ? d * 4
                               : (c.zero_stage >= 2 ? d / sh.dshard : d) * 2) +
      eg;
  // DualPipe keeps two copies of the stage's parameters (DeepSeek-V3
  // report §3.2.1, Table 2: "Parameter 2x"), each with its gradients.
  if (dualpipe_) {
    sc->weights *= 2;
    sc->grads *= 2;
  }
  sc->optim =
      (c.offload != Offload::none
           ? 0
           : (sh.sharded_optimizer ? d / sh.dshard : d) * optimizer_bytes_) +
      eo;
  sc->experts = ew + eg + eo;
  if (fp8_) {
    // Transformer Engine keeps an FP8 copy of each layer weight and its
    // transpose (2 bytes per parameter) across micro-batches, and an amax
    // history per FP8 tensor (3 per GEMM: 4 per layer, 2 per local expert).
    const double gemms = 4 + (shape_.experts > 0 ? shape_.moe_fraction * 2.0 *
                                                       shape_.experts / c.ep
                                                 : 0);
    // With the distributed optimizer the plan runs --fp8-param-gather:
    // the layers' compute weights are FP8 themselves (1 byte instead of the
    // bf16 copy's 2), so only the transpose is extra.
    const double layer_params = psi.layer_dense + e;
    sc->fp8 = (c.distributed_optimizer ? 0 : 2 * layer_params) +
              layers * gemms * 3 * kFp8AmaxHistory * 4;
  }
  // 1F1B: stage i holds min(m, p - i) micro-batches in flight; the
  // interleaved schedule adds (p-1)/(p v) (Korthikanti §4.2.3).
  double in_flight = std::min<double>(sh.m, sh.p - stage);
  if (sh.v > 1) in_flight *= 1 + static_cast<double>(sh.p - 1) / (sh.p * sh.v);
  sc->acts = layers * lc.act_bytes * in_flight + lc.work_bytes;
  sc->logits = k.last ? lc.logits_bytes : 0;
  // ZeRO-3 holds two gathered layers (the current and the prefetched one).
  sc->z3 =
      c.zero_stage >= 3
          ? (params_.expert_per_layer > 0
                 ? 2 * 2 *
                       ((params_.per_layer - params_.expert_per_layer) / c.tp +
                        params_.expert_per_layer / (c.ep * c.etp))
                 : 2 * 2 * params_.per_layer / c.tp)
          : 0;
}

// ---------------------------------------------------------------------------
// Layer split: balance stage times, not layer counts (Holmes-style for
// mixed NICs and GPUs; first and last stages carry the embedding and the
// output layer, as in Llama 3's pipeline that drops one layer from each,
// Dubey et al. 2024 §3.3.2). Each stage needs a layer per virtual stage.
// Stages of a class get the same layers, so the split is per class.
//
// 1. Fit every class's stage time as alpha L + beta (FitStageLines).
// 2. Give each class the most layers that keep it under a common target,
//    raising the target until all l layers are placed.
// 3. Trim the surplus from the slowest classes (TrimSurplus).
bool CostModel::SplitLayers(const Candidate& c, const Shape& sh,
                            StageClasses* classes) const {
  const int p = sh.p, l = sh.l;
  for (int k = 0; k < classes->size; ++k) classes->at[k].trimmed = 0;
  if (p == 1) {
    classes->at[0].layers = l;
    return true;
  }
  if (pinned_split_) return ApplyPinnedSplit(sh, classes);
  if (even_layers_) {
    // Megatron's default: l / p layers on every stage.
    if (l % p != 0 || l / p < sh.v) return false;
    for (int k = 0; k < classes->size; ++k) classes->at[k].layers = l / p;
    return true;
  }
  for (int k = 0; k < classes->size; ++k) {
    StageClass& cl = classes->at[k];
    cl.min_layers = MinStageLayers(sh.v, p, cl.first, cl.last);
  }
  const double first_target = FitStageLines(c, sh, classes);
  if (BalanceLayers(sh, first_target, classes)) return true;
  // No split fits in memory: the time-only split, so that the candidate is
  // judged (and reported) by how far it is from fitting.
  for (int k = 0; k < classes->size; ++k) {
    classes->at[k].max_layers = 1 << 30;
    classes->at[k].trimmed = 0;
  }
  if (BalanceLayers(sh, first_target, classes)) return true;
  // The balanced split leaves some stage below a layer per virtual stage
  // (e.g. 48 layers, p = 2, v = 24: first/last stages would give up a
  // layer). The even split, which Megatron runs by default, is valid
  // whenever p v divides l.
  if (l % (p * sh.v) != 0) return false;
  for (int k = 0; k < classes->size; ++k) {
    classes->at[k].layers = l / p;
    classes->at[k].trimmed = 0;
  }
  return true;
}

bool CostModel::BalanceLayers(const Shape& sh, double target,
                              StageClasses* classes) const {
  const int p = sh.p, l = sh.l;
  auto total_layers = [&] {
    int64_t sum = 0;
    for (int k = 0; k < classes->size; ++k) {
      StageClass& cl = classes->at[k];
      // At least the class's minimum (a layer per virtual stage, one less
      // on the first and last stages) and at most all of them (also keeps
      // a huge or NaN quotient of a near-zero alpha out of the int
      // conversion).
      double fit = std::floor((target - cl.beta) / cl.alpha + 1e-9);
      // No more layers than fit in the class's memory, when the time
      // alone would give it more (a stage over memory makes the plan
      // infeasible; another stage may hold the layer).
      fit = std::min(fit, static_cast<double>(cl.max_layers));
      cl.layers = !(fit >= cl.min_layers) ? cl.min_layers
                  : fit >= l              ? l
                                          : static_cast<int>(fit);
      sum += static_cast<int64_t>(cl.layers) * cl.count;
    }
    return sum;
  };
  int64_t have = total_layers();
  for (int guard = 0; have < l && guard < 4 * p + 16; ++guard) {
    double next = 1e300;
    for (int k = 0; k < classes->size; ++k) {
      const StageClass& cl = classes->at[k];
      if (cl.layers >= cl.max_layers) continue;  // full in memory
      next = std::min(next, cl.beta + cl.alpha * (cl.layers + 1));
    }
    if (next >= 1e300) break;  // every class is full: no split fits
    target = next;
    have = total_layers();
  }
  if (have < l) return false;
  bool ok = TrimSurplus(classes, have - l) == 0;
  for (int k = 0; ok && k < classes->size; ++k) {
    const StageClass& cl = classes->at[k];
    if (cl.layers - (cl.trimmed > 0 ? 1 : 0) < cl.min_layers) ok = false;
  }
  return ok;
}

bool CostModel::ApplyPinnedSplit(const Shape& sh,
                                 StageClasses* classes) const {
  if (pinned_p_ != sh.p || pinned_v_ != sh.v) {
    pinned_p_ = sh.p;
    pinned_v_ = sh.v;
    auto layers = PinnedStageLayers(split_fix_, model_, sh.p, sh.v);
    pinned_layers_ = layers.ok() ? *layers : std::vector<int>{};
  }
  if (static_cast<int>(pinned_layers_.size()) != sh.p) return false;
  for (int k = 0; k < classes->size; ++k) {
    StageClass& cl = classes->at[k];
    const std::vector<int>& at = layout_->positions[k];
    const int most = pinned_layers_[at.back()];
    int fewer = 0;
    while (fewer < static_cast<int>(at.size()) &&
           pinned_layers_[at[fewer]] == most - 1) {
      ++fewer;
    }
    for (size_t j = fewer; j < at.size(); ++j) {
      if (pinned_layers_[at[j]] != most) return false;
    }
    cl.layers = most;
    cl.trimmed = fewer;
  }
  return true;
}

// Removes `surplus` layers, one per stage, from the classes with the
// longest stage time first and, within a class, from the earliest stages
// first (StageClass::trimmed); no stage drops below its class's minimum.
// Returns the surplus left.
int64_t CostModel::TrimSurplus(StageClasses* classes, int64_t surplus) {
  int order[kMaxStageClasses];
  for (int k = 0; k < classes->size; ++k) order[k] = k;
  std::sort(order, order + classes->size, [&](int x, int y) {
    const StageClass& a = classes->at[x];
    const StageClass& b = classes->at[y];
    return a.alpha * a.layers + a.beta > b.alpha * b.layers + b.beta;
  });
  for (int oi = 0; oi < classes->size && surplus > 0; ++oi) {
    StageClass& cl = classes->at[order[oi]];
    if (cl.layers <= cl.min_layers) continue;
    cl.trimmed = static_cast<int>(std::min<int64_t>(cl.count, surplus));
    surplus -= cl.trimmed;
  }
  return surplus;
}

// Fits every class's stage time (as stage 0) as alpha L + beta from its
// costs at l/p and l/p + 1 layers. Returns the first target time: the one
// at which the lines, summed over all stages, would hold l layers exactly.
double CostModel::FitStageLines(const Candidate& c, const Shape& sh,
                                StageClasses* classes) const {
  const int l0 = std::max(1, sh.l / sh.p);
  double inv_sum = 0, beta_sum = 0;
  for (int k = 0; k < classes->size; ++k) {
    StageClass& cl = classes->at[k];
    // A stage's time does not depend on its index, its memory does (the
    // micro-batches in flight): the class's first stage holds the most.
    const int stage = layout_->positions[k][0];
    const StageCost s0 = CostOfStage(c, sh, cl, stage, l0);
    const StageCost s1 = CostOfStage(c, sh, cl, stage, l0 + 1);
    const double t0 = s0.time_s, t1 = s1.time_s;
    cl.alpha = std::max(1e-12, t1 - t0);
    cl.beta = t0 - cl.alpha * l0;
    // Memory is linear in the layers too: the most layers that fit.
    const double m0 = s0.Memory(reserve_bytes_), m1 = s1.Memory(reserve_bytes_);
    const double capacity = cl.link.gpu->memory_gib() * kGiB;
    const double fit = m1 > m0 ? std::floor((capacity - m0) / (m1 - m0) + l0 +
                                            1e-9)
                               : sh.l;
    cl.max_layers = !(fit < sh.l) ? sh.l : fit < 0 ? 0 : static_cast<int>(fit);
    inv_sum += cl.count / cl.alpha;
    beta_sum += cl.count * cl.beta / cl.alpha;
  }
  return (sh.l + beta_sum) / inv_sum;
}

// ---------------------------------------------------------------------------
// Breakdown: the exact cost of every stage under the split. Memory is
// reported for the critical stage (highest memory / capacity), time for the
// slowest stage, whose time is the step time; ties go to the earliest stage.
//
// Stages of one class holding the same number of layers take the same time,
// and their memory differs only in the micro-batches in flight,
// min(m, p - stage), which never grows with the stage index (StageMemory).
// So each (class, layers) group is costed once, at its first stage: that
// stage has the group's time, its highest memory, and is the earliest of
// them. Visiting the groups by first stage gives the same critical and
// slowest stages as visiting every stage, in O(groups) costings instead of
// O(p) (stages number in the hundreds for the largest jobs).
void CostModel::RecordStages(const Candidate& c, const Shape& sh,
                             const StageClasses& classes,
                             Evaluation* out) const {
  out->valid = true;
  out->fits = true;
  out->mixed_nic_stage = false;
  out->step_s = 0;
  out->host_fits = true;
  out->cpu_gib_per_node = out->nvme_gib_per_node = 0;
  const HostSpec& host = net_.host();
  double worst_ratio = -1;
  // Per class: its trimmed stages (layers - 1) from its first stage, the
  // others from its (trimmed + 1)-th.
  StageGroup groups[2 * kMaxStageClasses];
  int n = 0;
  for (int k = 0; k < classes.size; ++k) {
    const StageClass& cl = classes.at[k];
    const std::vector<int>& at = layout_->positions[k];
    if (cl.trimmed > 0) groups[n++] = {k, cl.layers - 1, at[0]};
    if (cl.trimmed < cl.count) groups[n++] = {k, cl.layers, at[cl.trimmed]};
  }
  std::sort(groups, groups + n, [](const StageGroup& a, const StageGroup& b) {
    return a.first < b.first;
  });
  for (int gi = 0; gi < n; ++gi) {
    const StageGroup& g = groups[gi];
    const StageClass& cl = classes.at[g.cls];
    const StageCost sc = CostOfStage(c, sh, cl, g.first, g.layers);
    if (cl.link.mixed_nic_types) out->mixed_nic_stage = true;
    const double capacity = cl.link.gpu->memory_gib();
    const double mem = sc.Memory(reserve_bytes_) / kGiB;
    if (mem > capacity) out->fits = false;
    if (c.offload != Offload::none) {
      // Host memory and NVMe per node (OffloadTime): every GPU of a node
      // keeps its shard there.
      out->cpu_gib_per_node =
          std::max(out->cpu_gib_per_node, sc.host_bytes / kGiB);
      out->nvme_gib_per_node =
          std::max(out->nvme_gib_per_node, sc.nvme_bytes / kGiB);
      if (out->cpu_gib_per_node > host.cpu_memory_gib() ||
          out->nvme_gib_per_node > host.nvme_gib()) {
        out->host_fits = false;
        out->fits = false;
      }
    }
    if (mem / capacity > worst_ratio) {
      worst_ratio = mem / capacity;
      RecordMemory(cl, sc, g.first, out);
    }
    if (sc.time_s > out->step_s) {
      RecordTime(sh, cl, sc, g.first, g.layers, out);
    }
  }
  out->core_sharing_s = out->fill_drain_s = 0;
  if (net_.cpu_cores_per_node() > 0) ShareCores(c, sh, classes, out);
}

void CostModel::StageLayers(const Candidate& c, const Shape& sh,
                            const StageClasses& classes,
                            Evaluation* out) const {
  out->layers.assign(sh.p, 0);
  out->stage_compute_s.assign(sh.p, 0);
  for (int k = 0; k < classes.size; ++k) {
    const StageClass& cl = classes.at[k];
    const LayerCost& lc = cl.lc;
    const std::vector<int>& at = layout_->positions[k];
    for (size_t j = 0; j < at.size(); ++j) {
      const int layers = cl.layers - (static_cast<int>(j) < cl.trimmed ? 1 : 0);
      out->layers[at[j]] = layers;
      const double per_mb =
          layers * (3 * lc.fwd_s + lc.bwd_extra_s + lc.recompute_s) +
          (cl.last ? lc.logits_s : 0);
      out->stage_compute_s[at[j]] =
          sh.m * per_mb + CostOfStage(c, sh, cl, at[j], layers).optimizer_s;
    }
  }
}

void CostModel::RecordMemory(const StageClass& k, const StageCost& sc,
                             int stage, Evaluation* out) const {
  out->critical_stage = stage;
  out->memory_gib = sc.Memory(reserve_bytes_) / kGiB;
  out->capacity_gib = k.link.gpu->memory_gib();
  out->weights_gib = sc.weights / kGiB;
  out->gradients_gib = sc.grads / kGiB;
  out->optimizer_state_gib = sc.optim / kGiB;
  out->activations_gib = sc.acts / kGiB;
  out->logits_gib = sc.logits / kGiB;
  out->zero3_buffers_gib = sc.z3 / kGiB;
  out->reserve_gib = reserve_bytes_ / kGiB;
  out->fp8_buffers_gib = sc.fp8 / kGiB;
  out->expert_states_gib = sc.experts / kGiB;
}

// Splits the stage's time into the breakdown terms: per micro-batch work
// times m, the p2p remainder of the micro-batch time, and the bubble
// (p-1)/v micro-batch slots (Narayanan §2.2).
void CostModel::RecordTime(const Shape& sh, const StageClass& k,
                           const StageCost& sc, int stage, int layers,
                           Evaluation* out) {
  const LayerCost& lc = k.lc;
  const double m = sh.m;
  const double L = layers;
  out->step_s = sc.time_s;
  out->slowest_stage = stage;
  out->compute_s = m * (L * 3 * lc.fwd_s + (k.last ? lc.logits_s : 0));
  out->recompute_s = m * L * lc.recompute_s;
  out->tp_comm_s = m * L * lc.tp_s;
  out->cp_comm_s = m * L * lc.cp_s;
  out->pp_comm_s = m * (sc.mb_s - L * lc.Total() - (k.last ? lc.logits_s : 0));
  out->bubble_s = sc.pipeline_s - m * sc.mb_s;
  out->dp_comm_s = sc.dp_exposed_s;
  out->dp_comm_total_s = sc.dp_total_s;
  out->optimizer_s = sc.optimizer_s;
  out->a2a_comm_s = m * L * lc.a2a_s;
  out->a2a_inter_node_fraction = lc.a2a_inter;
  out->offload_s = sc.offload_exposed_s;
  out->offload_total_s = sc.offload_total_s;
}

}  // namespace strata::planner
