// Step 1 of PlanJob: the search space (search_space.h).
#include "planner/search_space.h"

#include <algorithm>

#include "planner/cost_model.h"

namespace strata::planner::search_internal {
namespace {

constexpr ZeroOption kZeroOptions[] = {
    {0, false}, {1, false}, {1, true}, {2, false}, {3, false}};
constexpr Recompute::Mode kRecomputes[] = {
    Recompute::none, Recompute::selective, Recompute::full,
    Recompute::selective_op};

// The divisors of n up to max_value, ascending, in O(sqrt n).
std::vector<int> Divisors(int64_t n, int64_t max_value) {
  std::vector<int> low, high;
  for (int64_t d = 1; d * d <= n && d <= max_value; ++d) {
    if (n % d != 0) continue;
    low.push_back(static_cast<int>(d));
    const int64_t e = n / d;
    if (e != d && e <= max_value) high.push_back(static_cast<int>(e));
  }
  low.insert(low.end(), high.rbegin(), high.rend());
  return low;
}

}  // namespace

bool HostSupports(const HostSpec& host, Offload::Kind kind) {
  if (kind == Offload::none) return true;
  const bool cpu = host.cpu_memory_gib() > 0 && host.pcie_gbps() > 0;
  if (kind == Offload::cpu) return cpu;
  return cpu && host.nvme_gbps() > 0 && host.nvme_gib() > 0;
}

SearchSpace::SearchSpace(const PlanRequest& req, int seq)
    : req_(req), fix_(req.job.constraints()), layers_(req.model.num_layers()) {
  const ModelSpec& model = req.model;
  const int gpn = req.cluster.gpus_per_node();
  // TP must split heads, query groups, hidden, MLP and shared experts
  // evenly and stay inside a node's NVLink domain (Narayanan §3.3
  // takeaway #1).
  for (int t : Divisors(gpn, gpn)) {
    if (model.num_attention_heads() % t == 0 &&
        model.num_query_groups() % t == 0 && model.hidden_size() % t == 0 &&
        model.ffn_hidden_size() % t == 0 &&
        model.moe_shared_expert_intermediate_size() % t == 0) {
      tps_.push_back(t);
    }
  }
  // CP splits each sequence into 2 cp chunks for causal load balance
  // (Megatron context parallelism), so s % (2 cp) == 0.
  cps_ = {1};
  for (int c = 2; c <= req.gpus && seq % (2 * c) == 0 &&
                  (seq / (2 * c) >= kMinCpChunkTokens || fix_.has_cp());
       c *= 2) {
    cps_.push_back(c);
  }
  // EP splits the experts evenly (Megatron-core: num_experts %
  // expert_model_parallel_size == 0).
  eps_ = model.num_experts() > 0
             ? Divisors(model.num_experts(), model.num_experts())
             : std::vector<int>{1};
  max_micro_batch_ = fix_.has_micro_batch()
                         ? fix_.micro_batch()
                         : std::max<int64_t>(1, kMaxMicroBatchTokens / seq);
  max_vpp_ = fix_.has_vpp() ? fix_.vpp() : kMaxSearchVpp;
  const HostSpec& host = req.cluster.host();
  if (!fix_.has_offload()) {
    for (Offload::Kind k : {Offload::cpu, Offload::nvme}) {
      if (HostSupports(host, k)) offload_kinds_.push_back(k);
    }
  }
  // Offload dominance: per offloaded parameter the host needs at least
  // gpus_per_node / cpu_adam_rate (all GPUs of a node share the CPUs) and
  // 2 bytes / PCIe for the weights' return; the GPU step moves at most
  // 2 x 12 + 4 + 2 bytes per parameter at HBM speed (CostOfStage). When the
  // host is slower for every GPU type, offload only adds time.
  if (HostSupports(host, Offload::cpu)) {
    const double rate = (host.cpu_adam_gparams() > 0 ? host.cpu_adam_gparams()
                                                     : kDefaultCpuAdamGparams) *
                        1e9;
    host_s_per_param_ = std::max(gpn / rate, 2 / (host.pcie_gbps() * 1e9));
    double slowest_hbm = req.cluster.gpu().hbm_gbps();
    for (const NodeOverride& o : req.cluster.overrides()) {
      if (o.has_gpu()) slowest_hbm = std::min(slowest_hbm, o.gpu().hbm_gbps());
    }
    gpu_s_per_param_ = (2 * 12.0 + 4 + 2) / (std::max(slowest_hbm, 1e-9) * 1e9);
    offload_dominated_ = host_s_per_param_ >= gpu_s_per_param_;
  }
}

bool SearchSpace::OffloadAllowed(Offload::Kind kind, const Candidate& c) const {
  if (!HostSupports(req_.cluster.host(), kind)) return false;
  const bool sharded = c.zero_stage >= 1 || c.distributed_optimizer;
  if (req_.megatron_compatible) {
    return kind == Offload::cpu && c.distributed_optimizer;
  }
  return sharded || static_cast<int64_t>(c.dp) * c.cp == 1;
}

// tp x cp x pp with d = N / (t c p): p at most the layers, d divides the
// global batch.
void SearchSpace::Layouts(std::vector<Candidate>* out) const {
  out->clear();
  const int64_t n = req_.gpus;
  const int64_t batch = req_.job.global_batch();
  for (int t : tps_) {
    if (fix_.has_tp() && fix_.tp() != t) continue;
    for (int c : cps_) {
      if (fix_.has_cp() && fix_.cp() != c) continue;
      if (n % (static_cast<int64_t>(t) * c) != 0) continue;
      const int64_t rest = n / (static_cast<int64_t>(t) * c);
      for (int p : Divisors(rest, layers_)) {
        if (fix_.has_pp() && fix_.pp() != p) continue;
        const int64_t d = rest / p;
        if (fix_.has_dp() && fix_.dp() != d) continue;
        if (batch % d != 0) continue;
        Candidate layout;
        layout.tp = t;
        layout.cp = c;
        layout.pp = p;
        layout.dp = static_cast<int>(d);
        layout.sequence_parallel =
            !fix_.has_sequence_parallel() || fix_.sequence_parallel();
        if (req_.model.num_experts() == 0) {
          out->push_back(layout);
          continue;
        }
        std::vector<std::pair<int, int>> experts;
        ExpertLayouts(layout, &experts);
        for (auto [ep, etp] : experts) {
          layout.ep = ep;
          layout.etp = etp;
          out->push_back(layout);
        }
      }
    }
  }
}

// MoE parallel folding (Megatron-core moe/README.md "MoE Parallel
// Folding"): the MoE layers' tp(etp)-ep-dp groups fold into the
// attention's tp-cp-dp ranks of a stage, so ep x etp must divide t c d;
// EP divides the experts and ETP the expert width. The search tries ETP 1
// (the folding documentation's recommendation) and ETP = TP (Megatron's
// default); --fix may pin any value. Megatron needs sequence parallelism
// when an MoE model combines TP and EP.
void SearchSpace::ExpertLayouts(const Candidate& layout,
                                std::vector<std::pair<int, int>>* out) const {
  out->clear();
  const int64_t ranks = static_cast<int64_t>(layout.tp) * layout.cp * layout.dp;
  if (layout.tp > 1 && !layout.sequence_parallel) return;
  std::vector<int> etps = {1};
  if (layout.tp > 1) etps.push_back(layout.tp);
  if (fix_.has_etp()) etps = {fix_.etp()};
  for (int etp : etps) {
    if (req_.model.moe_ffn_hidden_size() % etp != 0) continue;
    for (int ep : eps_) {
      if (fix_.has_ep() && fix_.ep() != ep) continue;
      if (ranks % (static_cast<int64_t>(ep) * etp) != 0) continue;
      out->emplace_back(ep, etp);
    }
  }
}

// Micro-batch b divides the replica's batch B/d, m = B/(d b); vpp > 1
// needs p > 1, a layer per virtual stage and m % p == 0 (Megatron-LM
// schedules.py).
void SearchSpace::Schedules(const Candidate& layout,
                            std::vector<Candidate>* out) const {
  out->clear();
  const int p = layout.pp;
  const int64_t replica_batch = req_.job.global_batch() / layout.dp;
  for (int b : Divisors(replica_batch, max_micro_batch_)) {
    if (fix_.has_micro_batch() && fix_.micro_batch() != b) continue;
    const int64_t m = replica_batch / b;
    // vpp > 1 needs p > 1 (and m % p == 0): only v = 1 otherwise.
    // The embedding and the loss may take a virtual stage each
    // (MinStageLayers), so p v virtual stages need l + 2 >= p v.
    const int max_v = p == 1 || m % p != 0
                          ? 1
                          : std::min(max_vpp_, std::max(1, (layers_ + 2) / p));
    for (int v = 1; v <= max_v; ++v) {
      if (fix_.has_vpp() && fix_.vpp() != v) continue;
      if (v > 1 && (p == 1 || layers_ + 2 < p * v || m % p != 0)) continue;
      Candidate schedule = layout;
      schedule.micro_batch = b;
      schedule.num_microbatches = static_cast<int>(m);
      schedule.vpp = v;
      out->push_back(schedule);
    }
  }
}

void SearchSpace::Options(const Candidate& schedule,
                          std::vector<Candidate>* out) const {
  out->clear();
  for (const ZeroOption& z : kZeroOptions) {
    if (!ZeroAllowed(z, schedule)) continue;
    for (Recompute::Mode rc : kRecomputes) {
      if (!RecomputeAllowed(rc)) continue;
      Candidate c = schedule;
      c.zero_stage = z.stage;
      c.distributed_optimizer = z.distopt;
      c.recompute = rc;
      if (fix_.has_offload()) {
        c.offload = fix_.offload();
        if (c.offload != Offload::none && !OffloadAllowed(c.offload, c)) {
          continue;
        }
      }
      out->push_back(c);
    }
  }
}

bool SearchSpace::ZeroAllowed(const ZeroOption& z,
                              const Candidate& schedule) const {
  if (fix_.has_zero_stage() && fix_.zero_stage() != z.stage) return false;
  if (fix_.has_distributed_optimizer() &&
      fix_.distributed_optimizer() != z.distopt) {
    return false;
  }
  // Nothing to shard without data-parallel replicas.
  if (z.stage > 0 && static_cast<int64_t>(schedule.dp) * schedule.cp == 1) {
    return false;
  }
  // DeepSpeed: ZeRO-2/3 are incompatible with pipeline parallelism
  // (PipelineEngine asserts zero stage < 2).
  if (z.stage >= 2 && schedule.pp > 1) return false;
  // Megatron-LM shards optimizer state only as its distributed optimizer
  // (ZeRO-1); it has no ZeRO-2/3 in this sense.
  return !(req_.megatron_compatible && z.stage >= 1 && !z.distopt);
}

bool SearchSpace::RecomputeAllowed(Recompute::Mode rc) const {
  if (fix_.has_recompute() && fix_.recompute() != rc) return false;
  // torchtitan's op-level mode is costed when pinned (a torchtitan run);
  // the search, whose plans launch with Megatron-LM, does not try it.
  if (rc == Recompute::selective_op && !fix_.has_recompute()) return false;
  // Under fused attention selective recompute equals none (for MoE models
  // it also recomputes the experts' activation function and the norms).
  return !(rc == Recompute::selective && !fix_.has_recompute() &&
           req_.model.attention() == AttentionKernel::flash &&
           req_.model.num_experts() == 0);
}

}  // namespace strata::planner::search_internal
