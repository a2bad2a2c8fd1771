#include "planner/search.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/logging.h"
#include "planner/calibrate.h"
#include "planner/candidate.h"
#include "planner/cost_model.h"
#include "planner/job.h"
#include "planner/layout_rules.h"
#include "planner/model.h"
#include "planner/network.h"
#include "planner/node_speed.h"
#include "planner/pipeline_layout.h"
#include "planner/placement.h"
#include "planner/search_space.h"
#include "topology/cluster.h"

namespace strata::planner {

absl::Span<const FieldRange> PlanRanges() {
  static constexpr FieldRange kRanges[] = {
      {"--gpus", 1, kMaxGpus, false, "GPUs the plan uses"},
      {"--top", 1, 1000, false, "plans to show"},
      {"--time-budget", 0, 3600, false, "seconds the search may take"},
      {"--nodes", 1, topology::kMaxClusterNodes, false,
       "overrides the cluster's num_nodes"},
  };
  return kRanges;
}

namespace {

using search_internal::HostSupports;
using search_internal::SearchSpace;

// ---------------------------------------------------------------------------
// Step 3 of PlanJob: the comparison order and the top K (defined first:
// step 2 feeds it).

struct Scored {
  Candidate c;
  Evaluation e;
};

// The order of plans, written once: the faster predicted step first; on
// equal step times the smaller memory per GPU; then the configuration
// string. This is a total order, so the top K do not depend on the
// enumeration order.
bool RanksBefore(const Candidate& ca, const Evaluation& ea, const Candidate& cb,
                 const Evaluation& eb) {
  if (ea.step_s != eb.step_s) return ea.step_s < eb.step_s;
  if (ea.memory_gib != eb.memory_gib) return ea.memory_gib < eb.memory_gib;
  return ca.ToString() < cb.ToString();
}

// The best K candidates offered so far under RanksBefore, best first.
class TopK {
 public:
  explicit TopK(int k) : k_(k) {}

  void Offer(const Candidate& c, const Evaluation& e) {
    if (static_cast<int>(best_.size()) == k_ &&
        !RanksBefore(c, e, best_.back().c, best_.back().e)) {
      return;
    }
    Scored s{c, e};
    auto pos = std::upper_bound(best_.begin(), best_.end(), s,
                                [](const Scored& a, const Scored& b) {
                                  return RanksBefore(a.c, a.e, b.c, b.e);
                                });
    best_.insert(pos, std::move(s));
    if (static_cast<int>(best_.size()) > k_) best_.pop_back();
  }
  void Clear() { best_.clear(); }
  bool empty() const { return best_.empty(); }
  // The K-th best step time once K plans are kept (else infinity): a
  // candidate slower than it cannot enter.
  double Bar() const {
    return static_cast<int>(best_.size()) == k_ ? best_.back().e.step_s
                                                : 1e300;
  }
  const std::vector<Scored>& best() const { return best_; }

 private:
  const int k_;
  std::vector<Scored> best_;
};

// ---------------------------------------------------------------------------
// Step 2 of PlanJob: score and prune, within the time budget.

// Wall-clock budget of one PlanJob call, counted from `start`.
class Budget {
 public:
  Budget(std::chrono::steady_clock::time_point start, double seconds)
      : start_(start), seconds_(seconds) {}
  bool Left() const {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() -
                                         start_)
               .count() < seconds_;
  }

 private:
  std::chrono::steady_clock::time_point start_;
  double seconds_;
};

// What a search has seen so far.
struct Tally {
  explicit Tally(int k) : top(k) {}
  // Clears what one pass found (the budget's count carries on).
  void StartOver() {
    top.Clear();
    candidates = feasible = 0;
    closest_ratio = 1e300;
    plain_feasible = offload_scored = host_pruned = 0;
    have_offload = false;
    closest_host_ratio = 1e300;
  }

  TopK top;
  Scored closest;  // among those that do not fit: least memory / capacity
  double closest_ratio = 1e300;
  // Enumeration order of `closest` and `closest_host` (layout index, then
  // position in it), so that ties go to the first one however the space
  // was sharded.
  uint64_t closest_order = 0, closest_host_order = 0;
  int64_t candidates = 0;  // valid layer split, admitted by the pass
  int64_t feasible = 0;    // ... and fits in memory
  int64_t evaluated = 0;   // every call of CostModel::Evaluate
  // Skipped unevaluated: StepLowerBound above the top K's bar (with their
  // offload twins, whose step is at least the same pipeline time).
  int64_t bounded = 0;
  bool bound = true;  // PlanRequest::branch_and_bound
  bool skipped_mixed = false;
  // Offload: plans that fit without it, the fastest fitting offload plan,
  // and offload plans that fit in GPU memory but not on the host (the
  // closest of them by host memory per node).
  int64_t plain_feasible = 0;
  int64_t offload_scored = 0;
  bool have_offload = false;
  Scored best_offload;
  int64_t host_pruned = 0;
  Scored closest_host;
  double closest_host_ratio = 1e300;
};

// Evaluates one candidate and prunes: no valid layer split; a stage across
// two NIC fabrics unless `allow_mixed`; out of memory (remembering the
// closest to fitting, the first one on ties). What remains is offered to
// the top K.
void Score(const Candidate& c, uint64_t order, const CostModel& cost,
           bool allow_mixed, const HostSpec& host, Evaluation* eval,
           Tally* tally) {
  cost.Evaluate(c, eval, /*stage_layers=*/false);
  ++tally->evaluated;
  if (!eval->valid) return;
  if (eval->mixed_nic_stage && !allow_mixed) {
    tally->skipped_mixed = true;
    return;
  }
  ++tally->candidates;
  const bool offload = c.offload != Offload::none;
  if (offload) ++tally->offload_scored;
  const bool host_only =
      offload && !eval->host_fits && eval->memory_gib <= eval->capacity_gib;
  if (host_only) {
    // Fits on the GPUs, not on the host: pruned, the reason kept.
    ++tally->host_pruned;
    const double need =
        std::max(eval->cpu_gib_per_node / std::max(host.cpu_memory_gib(), 1e-9),
                 c.offload == Offload::nvme
                     ? eval->nvme_gib_per_node / std::max(host.nvme_gib(), 1e-9)
                     : 0.0);
    if (need < tally->closest_host_ratio) {
      tally->closest_host_ratio = need;
      tally->closest_host = {c, *eval};
      tally->closest_host_order = order;
    }
  }
  if (!eval->fits) {
    if (host_only) return;  // the closest is about GPU memory
    const double ratio = eval->memory_gib / eval->capacity_gib;
    if (ratio < tally->closest_ratio) {
      tally->closest_ratio = ratio;
      tally->closest = {c, *eval};
      tally->closest_order = order;
    }
    return;
  }
  ++tally->feasible;
  if (!offload) {
    ++tally->plain_feasible;
  } else if (!tally->have_offload ||
             RanksBefore(c, *eval, tally->best_offload.c,
                         tally->best_offload.e)) {
    tally->have_offload = true;
    tally->best_offload = {c, *eval};
  }
  tally->top.Offer(c, *eval);
}

// One pass over the space. Looks at the clock every kBudgetCheckInterval
// evaluations; returns false when the budget ran out (the pass stopped).
//
// Offload twins: after a candidate without offload, the same candidate with
// each offload target the space allows is scored, unless the candidate
// fits without offload and offload is dominated on this cluster (it then
// only adds time; SearchSpace::offload_dominated).
bool RunPass(const SearchSpace& space, const CostModel& cost,
             const HostSpec& host, const Budget& budget, bool allow_mixed,
             int shard, int shards, Tally* tally) {
  Evaluation eval;
  bool in_time = true;
  size_t layout = SIZE_MAX;
  uint64_t order = 0;
  auto score = [&](const Candidate& c) {
    Score(c, order++, cost, allow_mixed, host, &eval, tally);
    if (tally->evaluated % kBudgetCheckInterval == 0 && !budget.Left()) {
      in_time = false;
    }
  };
  return space.ForEachShard(shard, shards, [&](const Candidate& c, size_t i) {
    if (i != layout) {
      layout = i;
      order = static_cast<uint64_t>(i) << 32;
    }
    // Branch and bound: a candidate whose lower bound is slower than the
    // K-th best kept cannot be in the top K (RanksBefore orders by step
    // time first), nor can its offload twins (their pipeline time is the
    // same). Only once a plan fits without offload: until then the
    // closest non-fitting plan, which the notes name, may still change.
    if (tally->bound && tally->plain_feasible > 0 &&
        cost.StepLowerBound(c) > tally->top.Bar()) {
      ++order;
      ++tally->bounded;
      return in_time;
    }
    score(c);
    // Offload frees the optimizer state only: a fullest stage that would
    // not fit without it either is not tried (up to a changed layer split).
    if (c.offload != Offload::none || space.offload_kinds().empty() ||
        !eval.valid || (eval.mixed_nic_stage && !allow_mixed) ||
        (eval.fits && space.offload_dominated()) ||
        eval.memory_gib - eval.optimizer_state_gib > eval.capacity_gib) {
      return in_time;
    }
    for (Offload::Kind kind : space.offload_kinds()) {
      if (!in_time || !space.OffloadAllowed(kind, c)) continue;
      Candidate twin = c;
      twin.offload = kind;
      score(twin);
    }
    return in_time;
  });
}

// Adds what another shard's pass found to `into`: the same tally one pass
// over both shards would give (TopK and the first-on-ties rules are
// orders over candidates, not over the visit).
void Merge(const Tally& from, Tally* into) {
  for (const Scored& s : from.top.best()) into->top.Offer(s.c, s.e);
  if (from.closest_ratio < into->closest_ratio ||
      (from.closest_ratio == into->closest_ratio &&
       from.closest_order < into->closest_order)) {
    into->closest_ratio = from.closest_ratio;
    into->closest = from.closest;
    into->closest_order = from.closest_order;
  }
  if (from.closest_host_ratio < into->closest_host_ratio ||
      (from.closest_host_ratio == into->closest_host_ratio &&
       from.closest_host_order < into->closest_host_order)) {
    into->closest_host_ratio = from.closest_host_ratio;
    into->closest_host = from.closest_host;
    into->closest_host_order = from.closest_host_order;
  }
  into->candidates += from.candidates;
  into->feasible += from.feasible;
  into->evaluated += from.evaluated;
  into->bounded += from.bounded;
  into->skipped_mixed = into->skipped_mixed || from.skipped_mixed;
  into->plain_feasible += from.plain_feasible;
  into->offload_scored += from.offload_scored;
  into->host_pruned += from.host_pruned;
  if (from.have_offload &&
      (!into->have_offload ||
       RanksBefore(from.best_offload.c, from.best_offload.e,
                   into->best_offload.c, into->best_offload.e))) {
    into->have_offload = true;
    into->best_offload = from.best_offload;
  }
}

// One pass on `shards` threads: the calling thread scores shard 0 with
// `cost`, each other thread its own shard with its own CostModel (whose
// caches are not shared; SearchSpace and Network are read-only). The
// tallies are merged into `tally` in shard order. Returns false when any
// shard ran out of the budget.
bool RunParallelPass(const SearchSpace& space, const CostModel& cost,
                     const PlanRequest& req, const Network& net,
                     const Budget& budget, bool allow_mixed, int shards,
                     Tally* tally) {
  const HostSpec& host = req.cluster.host();
  if (shards <= 1) {
    return RunPass(space, cost, host, budget, allow_mixed, 0, 1, tally);
  }
  std::vector<Tally> parts(shards - 1, Tally(req.top_k));
  for (Tally& part : parts) part.bound = tally->bound;
  std::vector<char> in_time(shards, 1);
  std::vector<std::thread> threads;
  threads.reserve(shards - 1);
  for (int i = 1; i < shards; ++i) {
    threads.emplace_back([&, i] {
      const CostModel own(req.model, req.job, net);
      in_time[i] = RunPass(space, own, host, budget, allow_mixed, i, shards,
                           &parts[i - 1]);
    });
  }
  in_time[0] =
      RunPass(space, cost, host, budget, allow_mixed, 0, shards, tally);
  for (std::thread& t : threads) t.join();
  for (const Tally& part : parts) Merge(part, tally);
  return std::all_of(in_time.begin(), in_time.end(),
                     [](char ok) { return ok != 0; });
}

// Threads of the search: one per hardware thread, at most
// kMaxSearchThreads, and one when the space is a pinned handful.
int SearchThreads(const PlanRequest& req) {
  if (req.search_threads > 0) {
    return std::min(req.search_threads, kMaxSearchThreads);
  }
  const unsigned hw = std::thread::hardware_concurrency();
  const PlanConstraints& fix = req.job.constraints();
  if (fix.has_tp() && fix.has_pp() && fix.has_cp()) return 1;
  return static_cast<int>(
      std::clamp<unsigned>(hw, 1, static_cast<unsigned>(kMaxSearchThreads)));
}

// ---------------------------------------------------------------------------
// Step 4 of PlanJob: the report, or why there is none.

Plan ToPlan(const Scored& s, const CostModel& cost, const PlanRequest& req) {
  const Candidate& c = s.c;
  const Evaluation& e = s.e;
  Plan plan = SizesPlan(c);
  plan.set_precision(Precision::Kind_Name(cost.precision()));
  const int l = cost.model().num_layers();
  plan.set_params_b(cost.params().Total(l) / 1e9);
  plan.set_active_params_b(cost.params().Active(l) / 1e9);
  plan.set_micro_batch(c.micro_batch);
  plan.set_zero_stage(c.zero_stage);
  plan.set_distributed_optimizer(c.distributed_optimizer);
  plan.set_recompute(c.recompute);
  plan.set_sequence_parallel(c.tp > 1 && c.sequence_parallel);
  plan.set_num_microbatches(c.num_microbatches);
  plan.set_global_batch(req.job.global_batch());
  plan.set_seq_length(cost.seq_length());
  const StepFlops flops =
      TrainingFlops(cost.model(), req.job.global_batch(), cost.seq_length(),
                    c.recompute, cost.precision() == Precision::fp8);
  const double gpus = static_cast<double>(req.gpus);
  plan.set_step_time_s(e.step_s);
  plan.set_tokens_per_s(req.job.global_batch() * cost.seq_length() / e.step_s);
  plan.set_tflops_per_gpu(flops.model / e.step_s / gpus / 1e12);
  plan.set_hardware_tflops_per_gpu(flops.Hardware() / e.step_s / gpus / 1e12);
  plan.set_mfu(plan.tflops_per_gpu() / cost.mean_peak_tflops());
  plan.set_memory_gib_per_gpu(e.memory_gib);
  Breakdown* b = plan.mutable_breakdown();
  b->set_compute_s(e.compute_s);
  b->set_recompute_s(e.recompute_s);
  b->set_tp_comm_s(e.tp_comm_s);
  b->set_cp_comm_s(e.cp_comm_s);
  b->set_pp_comm_s(e.pp_comm_s);
  b->set_bubble_s(e.bubble_s);
  b->set_dp_comm_s(e.dp_comm_s);
  b->set_dp_comm_total_s(e.dp_comm_total_s);
  b->set_optimizer_s(e.optimizer_s);
  b->set_weights_gib(e.weights_gib);
  b->set_gradients_gib(e.gradients_gib);
  b->set_optimizer_state_gib(e.optimizer_state_gib);
  b->set_activations_gib(e.activations_gib);
  b->set_logits_gib(e.logits_gib);
  b->set_zero3_buffers_gib(e.zero3_buffers_gib);
  b->set_reserve_gib(e.reserve_gib);
  b->set_critical_stage(e.critical_stage);
  b->set_a2a_comm_s(e.a2a_comm_s);
  b->set_a2a_inter_node_fraction(e.a2a_inter_node_fraction);
  b->set_fp8_buffers_gib(e.fp8_buffers_gib);
  b->set_expert_states_gib(e.expert_states_gib);
  b->set_offload_s(e.offload_s);
  b->set_offload_total_s(e.offload_total_s);
  b->set_cpu_memory_gib_per_node(e.cpu_gib_per_node);
  b->set_nvme_gib_per_node(e.nvme_gib_per_node);
  b->set_core_sharing_s(e.core_sharing_s);
  b->set_fill_drain_s(e.fill_drain_s);
  plan.set_offload(c.offload);
  for (int l : e.layers) plan.add_layers_per_stage(l);
  for (double t : e.stage_compute_s) plan.add_stage_compute_s(t);
  return plan;
}

// --fix ep/etp against the model: EP divides the experts, ETP the expert
// width, and both need an MoE model.
Status CheckExperts(const PlanRequest& req) {
  const PlanConstraints& fix = req.job.constraints();
  const ModelSpec& m = req.model;
  if ((fix.has_ep() && fix.ep() > 1) || (fix.has_etp() && fix.etp() > 1)) {
    if (m.num_experts() == 0) {
      return absl::InvalidArgumentError(absl::StrCat(
          "field 'constraints.ep'/'constraints.etp' (--fix ep/etp) needs an "
          "MoE model; model '",
          m.name(), "' has num_experts 0"));
    }
  }
  if (fix.has_ep() && m.num_experts() > 0 && m.num_experts() % fix.ep() != 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "field 'constraints.ep' (--fix ep) = ", fix.ep(),
        " does not divide num_experts ", m.num_experts(), " of model '",
        m.name(), "' (expert parallelism splits the experts evenly)"));
  }
  if (fix.has_etp() && m.num_experts() > 0 &&
      m.moe_ffn_hidden_size() % fix.etp() != 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("field 'constraints.etp' (--fix etp) = ", fix.etp(),
                     " does not divide moe_ffn_hidden_size ",
                     m.moe_ffn_hidden_size(), " of model '", m.name(), "'"));
  }
  return absl::OkStatus();
}

// FP8 needs FP8 tensor cores on every GPU type of the cluster.
Status CheckPrecision(const PlanRequest& req) {
  if (EffectivePrecision(req.model, req.job) != Precision::fp8) {
    return absl::OkStatus();
  }
  auto check = [&](const GpuType& gpu, const std::string& field) -> Status {
    if (gpu.peak_fp8_tflops() > 0) return absl::OkStatus();
    return absl::InvalidArgumentError(absl::StrCat(
        "precision fp8 needs FP8 tensor cores, but cluster '",
        req.cluster.name(), "' GPU '", gpu.name(), "' has no field '", field,
        "' (absent or 0: no FP8 peak); give it in the cluster file, or plan "
        "with --fix precision=bf16"));
  };
  RETURN_IF_ERROR(check(req.cluster.gpu(), "gpu.peak_fp8_tflops"));
  for (int i = 0; i < req.cluster.overrides_size(); ++i) {
    const NodeOverride& o = req.cluster.overrides(i);
    if (o.has_gpu()) {
      RETURN_IF_ERROR(check(
          o.gpu(), absl::StrCat("overrides[", i, "].gpu.peak_fp8_tflops")));
    }
  }
  return absl::OkStatus();
}

Status ValidateRequest(const PlanRequest& req) {
  const auto plan_range = [](absl::string_view flag) {
    return *FindRange(PlanRanges(), flag);
  };
  RETURN_IF_ERROR(CheckValue(static_cast<double>(req.gpus),
                             plan_range("--gpus"), "--gpus"));
  RETURN_IF_ERROR(CheckValue(req.top_k, plan_range("--top"), "--top"));
  RETURN_IF_ERROR(CheckValue(req.time_budget_s, plan_range("--time-budget"),
                             "--time-budget"));
  // The planner's fields only: launch settings are the control plane's.
  JobSpec planned = req.job;
  planned.clear_launch();
  RETURN_IF_ERROR(ValidateJob(planned, "job"));
  RETURN_IF_ERROR(search_internal::CheckPinnedSplit(req));
  if (!req.job.has_global_batch()) {
    return absl::InvalidArgumentError("job: field 'global_batch' is missing");
  }
  if (!req.job.has_seq_length() && !req.model.has_seq_length()) {
    return absl::InvalidArgumentError(
        "the sequence length is missing (give --seq or the model's "
        "seq_length)");
  }
  RETURN_IF_ERROR(CheckExperts(req));
  RETURN_IF_ERROR(CheckPrecision(req));
  const PlanConstraints& fix = req.job.constraints();
  if (fix.has_offload() && !HostSupports(req.cluster.host(), fix.offload())) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--fix offload=", Offload::Kind_Name(fix.offload()), ": cluster '",
        req.cluster.name(), "' has no ",
        fix.offload() == Offload::cpu
            ? "host.cpu_memory_gib and host.pcie_gbps"
            : "host.cpu_memory_gib, host.pcie_gbps, host.nvme_gbps and "
              "host.nvme_gib",
        " (docs/config.md)"));
  }
  if (fix.has_offload() && fix.offload() == Offload::nvme &&
      req.megatron_compatible) {
    return absl::InvalidArgumentError(
        "--fix offload=nvme: Megatron-LM offloads optimizer states to CPU "
        "memory only (--optimizer-cpu-offload), and both --emit launchers "
        "run Megatron-LM: use offload=cpu, or plan without --emit");
  }
  if (fix.recompute() == Recompute::selective_op && req.megatron_compatible) {
    return absl::InvalidArgumentError(
        "--fix recompute=selective_op is torchtitan's op-level selective "
        "activation checkpointing; Megatron-LM, which both --emit launchers "
        "run, has no such mode: use recompute=selective or full, or plan "
        "without --emit");
  }
  if ((fix.eager() || fix.sdpa()) && req.megatron_compatible) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--fix ", fix.eager() ? "eager=1 costs PyTorch eager mode (torchtitan "
                                "without torch.compile)"
                              : "sdpa=1 costs PyTorch SDPA's attention "
                                "(torchtitan's)",
        "; Megatron-LM, which both --emit launchers run, uses fused "
        "kernels: plan without it, or without --emit"));
  }
  // DualPipe (planner/dualpipe.h) pairs stage i with stage pp-1-i: an even
  // pp, each rank's two stages instead of virtual stages.
  if (fix.dualpipe()) {
    if (!fix.has_pp() || fix.pp() < 2 || fix.pp() % 2 != 0) {
      return absl::InvalidArgumentError(
          "--fix dualpipe=1 needs an even pinned pp of at least 2 (DualPipe "
          "pairs stage i with stage pp-1-i), e.g. --fix pp=16,dualpipe=1");
    }
    if (fix.has_vpp() && fix.vpp() > 1) {
      return absl::InvalidArgumentError(
          "--fix dualpipe=1 cannot take vpp > 1: DualPipe's two stages per "
          "rank replace virtual stages");
    }
    if (req.megatron_compatible) {
      return absl::InvalidArgumentError(
          "--fix dualpipe=1: neither Megatron-LM nor torchtitan runs "
          "DeepSeek's DualPipe schedule, so no --emit launcher can: plan "
          "without --emit");
    }
  }
  const int64_t capacity = topology::ClusterGpus(req.cluster);
  if (capacity > 0 && req.gpus > capacity) {
    // A preset with num_nodes describes one machine; the same nodes at
    // another size are one flag away.
    const int gpn = req.cluster.gpus_per_node();
    return absl::InvalidArgumentError(absl::StrCat(
        "cluster '", req.cluster.name(), "' has ", capacity, " GPUs (",
        req.cluster.num_nodes(), " nodes x ", gpn, "); --gpus ", req.gpus,
        " asks for more. To plan the same nodes at a larger size, override "
        "its num_nodes: --nodes ",
        (req.gpus + gpn - 1) / gpn, " (or num_nodes in a cluster file)"));
  }
  return absl::OkStatus();
}

// Why offload did not help, for the errors and notes: host memory short
// (the closest plan that fit in GPU memory), or no host in the cluster.
std::string HostShortText(const PlanRequest& req, const Tally& tally) {
  if (tally.host_pruned == 0) return "";
  const Scored& h = tally.closest_host;
  const HostSpec& host = req.cluster.host();
  const bool nvme_short =
      h.c.offload == Offload::nvme && h.e.nvme_gib_per_node > host.nvme_gib();
  return absl::StrFormat(
      "offload %s pruned for %d plans that fit in GPU memory: the closest, "
      "%s, needs %.0f GiB of %s per node, the node has %.0f",
      Offload::Kind_Name(h.c.offload), tally.host_pruned, h.c.ToString(),
      nvme_short ? h.e.nvme_gib_per_node : h.e.cpu_gib_per_node,
      nvme_short ? "NVMe" : "CPU memory",
      nvme_short ? host.nvme_gib() : host.cpu_memory_gib());
}

Status NothingFitsError(const PlanRequest& req, const Tally& tally) {
  const Scored& closest = tally.closest;
  std::string offload;
  if (tally.host_pruned > 0) {
    offload = "; " + HostShortText(req, tally);
  } else if (!HostSupports(req.cluster.host(), Offload::cpu)) {
    offload =
        "; offload was not tried: the cluster has no host.cpu_memory_gib "
        "and host.pcie_gbps";
  }
  return absl::ResourceExhaustedError(absl::StrFormat(
      "no plan of model '%s' fits on %d x %s: the closest, %s, needs %.1f "
      "GiB per GPU, has %.0f (stage %d: weights %.1f, gradients %.1f, "
      "optimizer %.1f, activations %.1f, reserve %.1f GiB)%s",
      req.model.name(), req.gpus, req.cluster.gpu().name(),
      closest.c.ToString(), closest.e.memory_gib, closest.e.capacity_gib,
      closest.e.critical_stage, closest.e.weights_gib, closest.e.gradients_gib,
      closest.e.optimizer_state_gib, closest.e.activations_gib,
      closest.e.reserve_gib, offload));
}

// The report's notes on offload (`strata plan --explain`): why the best plan
// offloads, or what offload would cost, or why it was not tried, and what
// the host's memory pruned.
std::vector<std::string> OffloadNotes(const PlanRequest& req,
                                      const SearchSpace& space,
                                      const Tally& tally) {
  std::vector<std::string> notes;
  const Scored& best = tally.top.best().front();
  if (best.c.offload != Offload::none) {
    const double share = best.e.offload_s / best.e.step_s;
    if (req.job.constraints().has_offload()) {
      notes.push_back(absl::StrFormat(
          "offload %s: pinned (--fix offload); the host step costs %.3f s "
          "per step (%.0f%%)",
          Offload::Kind_Name(best.c.offload), best.e.offload_s, 100 * share));
    } else if (tally.plain_feasible == 0 && tally.closest_ratio < 1e300) {
      notes.push_back(absl::StrFormat(
          "offload %s: the only fitting plans offload (the closest plan "
          "that does not fit, %s, needs %.1f GiB per GPU, has %.0f); the "
          "host step costs %.3f s per step (%.0f%%)",
          Offload::Kind_Name(best.c.offload), tally.closest.c.ToString(),
          tally.closest.e.memory_gib, tally.closest.e.capacity_gib,
          best.e.offload_s, 100 * share));
    } else {
      notes.push_back(absl::StrFormat(
          "offload %s: the fastest plan that fits; its host step costs "
          "%.3f s per step (%.0f%%)",
          Offload::Kind_Name(best.c.offload), best.e.offload_s, 100 * share));
    }
  } else if (tally.have_offload) {
    const Scored& o = tally.best_offload;
    notes.push_back(absl::StrFormat(
        "offload: the fastest offload plan, %s, takes %.3f s per step "
        "(%+.0f%% over #1; host step %.3f s)",
        o.c.ToString(), o.e.step_s, 100 * (o.e.step_s / best.e.step_s - 1),
        o.e.offload_s));
  } else if (!space.offload_kinds().empty() && space.offload_dominated() &&
             tally.host_pruned == 0) {
    notes.push_back(absl::StrFormat(
        "offload: not needed; tried only for plans that do not fit without "
        "it (the host step takes >= %.2g ns per parameter, the GPU's <= %.2g)",
        1e9 * space.host_s_per_param(), 1e9 * space.gpu_s_per_param()));
  } else if (space.offload_kinds().empty() &&
             !req.job.constraints().has_offload()) {
    notes.push_back(
        "offload: not available (the cluster has no host.cpu_memory_gib and "
        "host.pcie_gbps)");
  }
  if (tally.host_pruned > 0) notes.push_back(HostShortText(req, tally));
  return notes;
}

Status OutOfTimeError(const PlanRequest& req, const Tally& tally) {
  return absl::DeadlineExceededError(absl::StrFormat(
      "the search of model '%s' on %d GPUs ran out of its %.3g s time "
      "budget after %d candidates, none of which fits; raise --time-budget",
      req.model.name(), req.gpus, req.time_budget_s, tally.evaluated));
}

PlanReport BuildReport(const PlanRequest& req, const CostModel& cost,
                       const Network& net, const Tally& tally) {
  PlanReport report;
  report.set_model(req.model.name());
  report.set_cluster(req.cluster.name());
  report.set_gpus(static_cast<int>(req.gpus));
  const std::vector<Scored>& best = tally.top.best();
  for (size_t i = 0; i < best.size(); ++i) {
    // Scoring skipped the per-stage layer list; the same evaluation with it.
    Scored s = best[i];
    cost.Evaluate(s.c, &s.e);
    Plan* plan = report.add_plans();
    *plan = ToPlan(s, cost, req);
    if (i == 0 && req.with_placement) {
      *plan->mutable_placement() = BuildPlacement(s.c, s.e.layers, net);
    }
  }
  SearchStats* stats = report.mutable_search();
  stats->set_candidates(tally.candidates);
  stats->set_feasible(tally.feasible);
  return report;
}

}  // namespace

namespace {

// The search in four steps: the space (SearchSpace: enumeration with the
// divisibility rules), scoring (Score: cost model, pruning by layer split,
// NIC fabric and memory), the top K (TopK under RanksBefore), the report.
// `req` is validated, its calibration and node speeds applied.
StatusOr<PlanReport> Search(const PlanRequest& req,
                            std::chrono::steady_clock::time_point start) {
  const int gpn = req.cluster.gpus_per_node();
  const int num_nodes = static_cast<int>((req.gpus + gpn - 1) / gpn);
  ASSIGN_OR_RETURN(std::vector<topology::NodeInfo> nodes,
                   topology::SelectNodes(req.cluster, num_nodes));
  const Network net(req.cluster, std::move(nodes));
  const CostModel cost(req.model, req.job, net);
  const SearchSpace space(req, cost.seq_length());
  const Budget budget(start, req.time_budget_s);
  Tally tally(req.top_k);
  tally.bound = req.branch_and_bound;
  // On clusters with several NIC fabrics, stages that straddle two are
  // used only when no layout keeps every stage on one (RDMA does not cross
  // fabrics; Holmes).
  const int shards = SearchThreads(req);
  bool in_time = RunParallelPass(space, cost, req, net, budget,
                                 /*allow_mixed=*/false, shards, &tally);
  if (in_time && tally.top.empty() && tally.skipped_mixed) {
    tally.StartOver();
    in_time = RunParallelPass(space, cost, req, net, budget,
                              /*allow_mixed=*/true, shards, &tally);
  }
  if (!in_time && tally.top.empty()) return OutOfTimeError(req, tally);
  if (tally.candidates == 0) return search_internal::NoLayoutError(req);
  if (tally.top.empty()) return NothingFitsError(req, tally);

  PlanReport report = BuildReport(req, cost, net, tally);
  for (std::string& note : OffloadNotes(req, space, tally)) {
    report.add_notes(std::move(note));
  }
  SearchStats* stats = report.mutable_search();
  stats->set_elapsed_s(
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start)
          .count());
  stats->set_budget_exceeded(!in_time);
  auto log = GetLogger("PLAN");
  if (!in_time) {
    log->warn(
        "time budget of {} s ran out after {} candidates: the search is not "
        "exhaustive, returning the best {} found so far",
        req.time_budget_s, tally.evaluated, report.plans_size());
  }
  log->info("searched {} candidates ({} fit) in {:.3f} s", tally.candidates,
            tally.feasible, stats->elapsed_s());
  return report;
}

}  // namespace

StatusOr<PlanReport> PlanJob(const PlanRequest& req) {
  const auto start = std::chrono::steady_clock::now();
  RETURN_IF_ERROR(ValidateRequest(req));
  const PlanConstraints& fix = req.job.constraints();
  if (fix.has_pipeline_layout() && !fix.has_vpp()) {
    // The layout string gives the virtual stages (CheckPinnedSplit checked
    // it against the pinned pp).
    PlanRequest pinned = req;
    pinned.job.mutable_constraints()->set_vpp(
        *LayoutVpp(fix.pipeline_layout(), fix.pp()));
    return PlanJob(pinned);
  }
  if (req.job.node_speed().empty() && !req.cluster.has_calibration()) {
    return Search(req, start);
  }
  // The calibration's device constants, then per-node speeds as node
  // overrides (their own node classes) on top of them.
  PlanRequest prepared = req;
  ApplyCalibration(&prepared.cluster);
  const int gpn = req.cluster.gpus_per_node();
  const int num_nodes = static_cast<int>((req.gpus + gpn - 1) / gpn);
  prepared.job.clear_node_speed();
  RETURN_IF_ERROR(
      ApplyNodeSpeeds(req.job.node_speed(), num_nodes, &prepared.cluster));
  ASSIGN_OR_RETURN(PlanReport report, Search(prepared, start));
  if (req.cluster.has_calibration()) {
    const Calibration& cal = req.cluster.calibration();
    report.set_calibration(absl::StrCat(
        "calibration applied (",
        cal.source().empty() ? "no source" : cal.source(),
        cal.samples() > 0
            ? absl::StrFormat("; %d samples, step-time rms error %.0f%% "
                              "before the fit, %.0f%% after",
                              cal.samples(), 100 * cal.rms_error_before(),
                              100 * cal.rms_error_after())
            : std::string(),
        ")"));
  }
  return report;
}

}  // namespace strata::planner
