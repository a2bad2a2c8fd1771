#include "planner/cost_model.h"

#include <algorithm>
#include <cmath>

namespace strata::planner {
namespace {

constexpr double kGiB = 1024.0 * 1024.0 * 1024.0;

// Communication hidden behind `window` seconds of compute still slows that
// compute: NCCL kernels occupy SMs and HBM bandwidth while they run.
double Exposed(double comm, double window) {
  return std::max(0.0, comm - window) + kOverlapTax * std::min(comm, window);
}

}  // namespace

struct CostModel::LayerCost {
  double fwd_s = 0;        // forward of one layer for one micro-batch
  double bwd_extra_s = 0;  // backward beyond 2x forward (flash recompute)
  double recompute_s = 0;  // extra forward work of the recompute mode
  double tp_s = 0;         // tensor-parallel collectives, fwd + bwd (+ rc)
  double cp_s = 0;         // exposed context-parallel ring traffic
  double act_bytes = 0;    // activations kept per layer per micro-batch
  double work_bytes = 0;   // working set of one recomputed layer
  double p2p_bytes = 0;    // stage-boundary tensor
  double logits_s = 0;     // output layer fwd + bwd, one micro-batch
  double logits_bytes = 0;
  double Total() const {
    return 3 * fwd_s + bwd_extra_s + recompute_s + tp_s + cp_s;
  }
};

struct CostModel::StageCost {
  double time_s = 0;
  double mb_s = 0;  // one micro-batch through this stage
  double pipeline_s = 0;
  double dp_exposed_s = 0, dp_total_s = 0, optimizer_s = 0;
  double weights = 0, grads = 0, optim = 0, acts = 0, logits = 0, z3 = 0;
  double Memory(double reserve) const {
    return weights + grads + optim + acts + logits + z3 + reserve;
  }
};

CostModel::CostModel(const ModelSpec& model, const JobSpec& job,
                     const Network& net)
    : model_(model), net_(net) {
  seq_ = job.seq_length() > 0 ? job.seq_length() : model.seq_length();
  global_batch_ = job.global_batch();
  // Mixed-precision Adam keeps fp32 master weights and two moments
  // (12 bytes/param); SGD with momentum keeps master + momentum (8)
  // [Rajbhandari et al. SC'20 §3.1].
  optimizer_bytes_ = job.optimizer() == Optimizer::sgd ? 8 : 12;
  reserve_bytes_ = (job.constraints().has_memory_reserve_gib()
                        ? job.constraints().memory_reserve_gib()
                        : kDefaultReserveGib) *
                   kGiB;
  params_ = CountParameters(model, seq_);
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
  act_coeff_ = (model.dropout() ? 14 : 12) + 4 * kv / h +
               (model.activation() == Activation::swiglu ? 6 : 4) * f_over_h;
}

double CostModel::Gemm(double m, double n, double k, const GpuType& gpu) const {
  const double shape = (m / (m + kGemmHalfDim)) * (n / (n + kGemmHalfDim)) *
                       (k / (k + kGemmHalfDim));
  return 2 * m * n * k /
         (gpu.peak_bf16_tflops() * 1e12 * gpu.gemm_efficiency() * shape);
}

CostModel::LayerCost CostModel::Layer(const Candidate& c,
                                      const GpuType& gpu) const {
  const double h = model_.hidden_size();
  const double a = model_.num_attention_heads();
  const double kv = h * model_.num_query_groups() / a;
  const double f = model_.ffn_hidden_size();
  const double V = model_.vocab_size();
  const double s = seq_;
  const double t = c.tp, cp = c.cp, b = c.micro_batch;
  const double tokens = b * s / cp;  // per GPU per micro-batch
  const double hbm = gpu.hbm_gbps() * 1e9;
  LayerCost lc;
  // Megatron's column/row-parallel split (Shoeybi et al. 2019 §3).
  double gemm =
      Gemm(tokens, (h + 2 * kv) / t, h, gpu) + Gemm(tokens, h, h / t, gpu);
  if (model_.activation() == Activation::swiglu) {
    gemm += Gemm(tokens, 2 * f / t, h, gpu) + Gemm(tokens, h, f / t, gpu);
  } else {
    gemm += Gemm(tokens, f / t, h, gpu) + Gemm(tokens, h, f / t, gpu);
  }
  // Core attention: each of the rank's queries meets all s keys (ring CP).
  const bool flash = model_.attention() == AttentionKernel::flash;
  const double attn =
      4 * tokens * s * h / t /
      (gpu.peak_bf16_tflops() * 1e12 * gpu.gemm_efficiency() *
       (flash ? kFlashAttentionEfficiency : kAttentionEfficiency));
  // Activation bytes (Korthikanti Table 2, with sequence parallelism so
  // every term divides by t) and the attention-score term 5 a s^2 b / t,
  // which fused attention never writes to HBM (Dao et al. 2022).
  // Without sequence parallelism the norms, dropouts and the inputs of the
  // QKV and MLP GEMMs (10 s b h) are replicated on every TP rank
  // (Korthikanti Table 2: s b h (10 + 24/t + 5 a s/(h t))).
  const double act_lin = c.sequence_parallel || c.tp == 1
                             ? tokens * h * act_coeff_ / t
                             : tokens * h * (10 + (act_coeff_ - 10) / t);
  // Scores: softmax output (2), dropout mask (1) and output (2) per score;
  // without dropout only the softmax output.
  const double act_scores =
      flash ? 0 : (model_.dropout() ? 5 : 2) * b * (a / t) * (s / cp) * s;
  const double elem_lin = kElementwisePasses * act_lin / hbm;
  const double elem_scores = kElementwisePasses * act_scores / hbm;
  lc.fwd_s = gemm + attn + elem_lin + elem_scores;
  // FlashAttention's backward recomputes QK^T and softmax: 2.5x the forward
  // attention FLOPs instead of 2x (Dao 2023, FlashAttention-2 §3.1.2).
  if (flash) lc.bwd_extra_s = 0.5 * attn;
  switch (c.recompute) {
    case Recompute::full:
      lc.recompute_s = lc.fwd_s;
      // Layer input, sharded along the sequence under SP.
      lc.act_bytes = 2 * tokens * h / (c.sequence_parallel ? t : 1);
      lc.work_bytes = act_lin + act_scores;
      break;
    case Recompute::selective:
      // Core attention only; with fused attention there is nothing left
      // to recompute (the kernel already does it) and nothing to save.
      lc.recompute_s = flash ? 0 : attn + elem_scores;
      lc.act_bytes = act_lin;
      break;
    default:
      lc.act_bytes = act_lin + act_scores;
  }
  // TP: per layer 2 all-reduce-equivalents forward and 2 backward of the
  // b s h activation (Narayanan §3.2; with SP each becomes an all-gather +
  // reduce-scatter pair of the same volume, Korthikanti §4.2.2); full
  // recompute repeats the forward pair.
  if (c.tp > 1) {
    const int n = c.recompute == Recompute::full ? 6 : 4;
    lc.tp_s = n * net_.IntraAllReduce(2 * tokens * h, c.tp);
  }
  // CP: ring attention passes K and V chunks around the c ranks, c-1 steps
  // forward and twice that backward (K/V and their gradients), overlapped
  // with the attention compute (Liu et al. 2023, Ring Attention; Megatron
  // context parallelism).
  if (c.cp > 1) {
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
    lc.cp_s = Exposed(comm, overlap);
  }
  // Stage boundary: SP already shards it; without SP Megatron's
  // scatter/gather optimisation sends 1/t per rank too (Narayanan §4.1).
  lc.p2p_bytes = 2 * tokens * h / t;
  // Output layer: logits GEMM forward + 2x backward, and the fp32 softmax /
  // cross-entropy buffer of 4 s b V / t bytes (Korthikanti §4.3).
  lc.logits_bytes = 4 * tokens * V / t;
  lc.logits_s = 3 * Gemm(tokens, V / t, h, gpu) +
                kElementwisePasses * lc.logits_bytes / hbm;
  return lc;
}

void CostModel::Evaluate(const Candidate& c, Evaluation* out) const {
  const int p = c.pp, v = c.vpp, l = model_.num_layers();
  const int gpn = net_.gpus_per_node();
  const int64_t stage_ranks = static_cast<int64_t>(c.tp) * c.cp * c.dp;
  const double m = c.num_microbatches;
  const double steps = m + static_cast<double>(p - 1) / v;
  const double dshard = static_cast<double>(c.dp) * c.cp;  // grads reduce
  const bool sharded_optimizer = c.zero_stage >= 1 || c.distributed_optimizer;
  const double grad_bytes = c.distributed_optimizer ? 4 : 2;
  const int dp_per_node = std::max(1, gpn / std::max(1, c.tp));
  const int stage_nodes = static_cast<int>((stage_ranks + gpn - 1) / gpn);

  // Links of every stage; stages on equal links and GPUs form a class.
  struct Class {
    GroupLink link;
    bool first, last;
    LayerCost lc;
    double alpha = 0, beta = 0;  // time(L) ~ alpha L + beta
    int count = 0, layers = 0;
  };
  Class classes[16];
  int num_classes = 0;
  std::vector<int>& stage_class = scratch_class_;
  stage_class.assign(p, 0);

  auto stage_params = [&](bool first, bool last, int layers) {
    double params = layers * params_.per_layer;
    if (first) params += params_.embedding + params_.position;
    if (last) {
      // Untied output layer, or Megatron's copy of the tied embedding on the
      // last stage when p > 1 (Shoeybi et al. 2019).
      params +=
          params_.output > 0 ? params_.output : (p > 1 ? params_.embedding : 0);
      params += params_.final_norm;
    }
    return params / c.tp;
  };

  auto stage_cost = [&](const Class& k, int stage, int layers) {
    StageCost sc;
    const LayerCost& lc = k.lc;
    const bool crosses = stage_ranks >= gpn;
    const double p2p =
        p > 1 ? 2.0 * v * net_.P2P(lc.p2p_bytes, crosses, k.link) : 0.0;
    sc.mb_s = layers * lc.Total() + (k.last ? lc.logits_s : 0) + p2p;
    sc.pipeline_s = steps * sc.mb_s;
    // Data-parallel traffic of this stage's parameters (ZeRO paper §5 and
    // §7 for volumes; overlap as in PyTorch DDP / Megatron
    // --overlap-grad-reduce: gradients of the last micro-batch are reduced
    // while its backward runs; parameters gathered during the forward).
    const double psi = stage_params(k.first, k.last, layers);
    const double fwd_window = layers * lc.fwd_s;
    const double bwd_window = layers * (2 * lc.fwd_s + lc.recompute_s);
    if (dshard > 1) {
      const double grads = psi * grad_bytes, weights = psi * 2;
      if (c.zero_stage == 0 && !c.distributed_optimizer) {
        sc.dp_total_s = Network::AllReduce(grads, k.link);
        sc.dp_exposed_s = Exposed(sc.dp_total_s, bwd_window);
      } else if (c.zero_stage <= 1) {
        const double rs = Network::ReduceScatter(grads, k.link);
        const double ag = Network::AllGather(weights, k.link);
        sc.dp_total_s = rs + ag;
        sc.dp_exposed_s = Exposed(rs, bwd_window) + Exposed(ag, fwd_window);
      } else if (c.zero_stage == 2) {
        // Partitioned gradients are reduced after every micro-batch.
        const double rs = Network::ReduceScatter(grads, k.link);
        const double ag = Network::AllGather(weights, k.link);
        sc.dp_total_s = m * rs + ag;
        sc.dp_exposed_s = m * Exposed(rs, bwd_window) + Exposed(ag, fwd_window);
      } else {
        // ZeRO-3 gathers parameters for the forward, the backward (and the
        // recompute) and reduce-scatters gradients, every micro-batch.
        const double gathers = c.recompute == Recompute::full ? 3 : 2;
        const double per_mb = gathers * Network::AllGather(weights, k.link) +
                              Network::ReduceScatter(grads, k.link);
        sc.dp_total_s = m * per_mb;
        sc.dp_exposed_s = m * Exposed(per_mb, layers * lc.Total());
      }
    }
    // Optimizer step is memory bound: Adam reads and writes master weights
    // and moments, reads gradients and writes 16-bit weights.
    const double local = sharded_optimizer ? psi / dshard : psi;
    sc.optimizer_s = local * (2 * optimizer_bytes_ + grad_bytes + 2) /
                     (k.link.gpu->hbm_gbps() * 1e9);
    sc.time_s = sc.pipeline_s + sc.dp_exposed_s + sc.optimizer_s;

    // Memory (Rajbhandari et al. SC'20 §3.1 and Table 1; Megatron
    // distributed optimizer: 2 + 4 + 12/d bytes per parameter).
    sc.weights = (c.zero_stage >= 3 ? psi / dshard : psi) * 2;
    sc.grads = c.distributed_optimizer
                   ? psi * 4
                   : (c.zero_stage >= 2 ? psi / dshard : psi) * 2;
    sc.optim = (sharded_optimizer ? psi / dshard : psi) * optimizer_bytes_;
    // 1F1B: stage i holds min(m, p - i) micro-batches in flight; the
    // interleaved schedule adds (p-1)/(p v) (Korthikanti §4.2.3).
    double in_flight = std::min<double>(m, p - stage);
    if (v > 1) in_flight *= 1 + static_cast<double>(p - 1) / (p * v);
    sc.acts = layers * lc.act_bytes * in_flight + lc.work_bytes;
    sc.logits = k.last ? lc.logits_bytes : 0;
    sc.z3 = c.zero_stage >= 3 ? 2 * 2 * params_.per_layer / c.tp : 0;
    return sc;
  };

  for (int i = 0; i < p; ++i) {
    const GroupLink link = net_.Link(i * stage_ranks, stage_ranks, dp_per_node,
                                     c.dp * c.cp, stage_nodes);
    const bool first = i == 0, last = i == p - 1;
    int k = 0;
    for (; k < num_classes; ++k) {
      const Class& cl = classes[k];
      if (cl.first == first && cl.last == last && cl.link.gpu == link.gpu &&
          cl.link.inter_gbps == link.inter_gbps &&
          cl.link.nodes == link.nodes) {
        break;
      }
    }
    if (k == num_classes) {
      if (num_classes == 16)
        k = num_classes - 1;  // merge the rest
      else {
        Class& cl = classes[num_classes++];
        cl.link = link;
        cl.first = first;
        cl.last = last;
        cl.lc = Layer(c, *link.gpu);
      }
    }
    ++classes[k].count;
    stage_class[i] = k;
  }

  // Layer split: balance stage times, not layer counts (Holmes-style for
  // mixed NICs and GPUs; first and last stages carry the embedding and the
  // output layer, as in Llama 3's pipeline that drops one layer from each,
  // Dubey et al. 2024 §3.3.2). Each stage needs a layer per virtual stage.
  std::vector<int>& layers = out->layers;
  layers.assign(p, l / p);
  if (p > 1) {
    const int l0 = std::max(1, l / p);
    double inv_sum = 0, beta_sum = 0;
    for (int k = 0; k < num_classes; ++k) {
      Class& cl = classes[k];
      const int stage = 0;
      const double t0 = stage_cost(cl, stage, l0).time_s;
      const double t1 = stage_cost(cl, stage, l0 + 1).time_s;
      cl.alpha = std::max(1e-12, t1 - t0);
      cl.beta = t0 - cl.alpha * l0;
      inv_sum += cl.count / cl.alpha;
      beta_sum += cl.count * cl.beta / cl.alpha;
    }
    double target = (l + beta_sum) / inv_sum;
    auto total_layers = [&] {
      int64_t sum = 0;
      for (int k = 0; k < num_classes; ++k) {
        Class& cl = classes[k];
        cl.layers = std::max(
            1,
            static_cast<int>(std::floor((target - cl.beta) / cl.alpha + 1e-9)));
        sum += static_cast<int64_t>(cl.layers) * cl.count;
      }
      return sum;
    };
    int64_t have = total_layers();
    for (int guard = 0; have < l && guard < 4 * p + 16; ++guard) {
      double next = 1e300;
      for (int k = 0; k < num_classes; ++k) {
        next = std::min(
            next, classes[k].beta + classes[k].alpha * (classes[k].layers + 1));
      }
      target = next;
      have = total_layers();
    }
    for (int i = 0; i < p; ++i) layers[i] = classes[stage_class[i]].layers;
    // Remove the surplus from the slowest classes, later stages first
    // (they hold fewer micro-batches, but the last has the output layer).
    int64_t surplus = have - l;
    int order[16];
    for (int k = 0; k < num_classes; ++k) order[k] = k;
    std::sort(order, order + num_classes, [&](int x, int y) {
      return classes[x].alpha * classes[x].layers + classes[x].beta >
             classes[y].alpha * classes[y].layers + classes[y].beta;
    });
    for (int oi = 0; oi < num_classes && surplus > 0; ++oi) {
      for (int i = 0; i < p && surplus > 0; ++i) {
        if (stage_class[i] == order[oi] && layers[i] > 1) {
          --layers[i];
          --surplus;
        }
      }
    }
    if (surplus != 0) {
      out->valid = false;
      return;
    }
    for (int i = 0; i < p; ++i) {
      if (layers[i] < v) {
        out->valid = false;
        return;
      }
    }
  }

  // Exact cost of every stage under the split.
  out->valid = true;
  out->fits = true;
  out->mixed_nic_stage = false;
  out->step_s = 0;
  double worst_ratio = -1;
  for (int i = 0; i < p; ++i) {
    const Class& cl = classes[stage_class[i]];
    const StageCost sc = stage_cost(cl, i, layers[i]);
    if (cl.link.mixed_nic_types) out->mixed_nic_stage = true;
    const double capacity = cl.link.gpu->memory_gib();
    const double mem = sc.Memory(reserve_bytes_) / kGiB;
    if (mem > capacity) out->fits = false;
    if (mem / capacity > worst_ratio) {
      worst_ratio = mem / capacity;
      out->critical_stage = i;
      out->memory_gib = mem;
      out->capacity_gib = capacity;
      out->weights_gib = sc.weights / kGiB;
      out->gradients_gib = sc.grads / kGiB;
      out->optimizer_state_gib = sc.optim / kGiB;
      out->activations_gib = sc.acts / kGiB;
      out->logits_gib = sc.logits / kGiB;
      out->zero3_buffers_gib = sc.z3 / kGiB;
      out->reserve_gib = reserve_bytes_ / kGiB;
    }
    if (sc.time_s > out->step_s) {
      out->step_s = sc.time_s;
      out->slowest_stage = i;
      const LayerCost& lc = cl.lc;
      const double L = layers[i];
      out->compute_s = m * (L * 3 * lc.fwd_s + (cl.last ? lc.logits_s : 0));
      out->recompute_s = m * L * lc.recompute_s;
      out->tp_comm_s = m * L * lc.tp_s;
      out->cp_comm_s = m * L * lc.cp_s;
      out->pp_comm_s =
          m * (sc.mb_s - L * lc.Total() - (cl.last ? lc.logits_s : 0));
      out->bubble_s = sc.pipeline_s - m * sc.mb_s;
      out->dp_comm_s = sc.dp_exposed_s;
      out->dp_comm_total_s = sc.dp_total_s;
      out->optimizer_s = sc.optimizer_s;
    }
  }
}

}  // namespace strata::planner
