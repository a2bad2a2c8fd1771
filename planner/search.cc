#include "planner/search.h"

#include <algorithm>
#include <chrono>
#include <cmath>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/logging.h"
#include "planner/candidate.h"
#include "planner/cost_model.h"
#include "planner/model.h"
#include "planner/network.h"
#include "planner/placement.h"
#include "topology/cluster.h"

namespace strata::planner {
namespace {

std::vector<int> Divisors(int64_t n, int64_t max_value) {
  std::vector<int> out;
  for (int64_t d = 1; d <= n && d <= max_value; ++d) {
    if (n % d == 0) out.push_back(static_cast<int>(d));
  }
  return out;
}

struct Scored {
  Candidate c;
  Evaluation e;
};

// Orders by step time, then by a stable key so ties are deterministic.
bool Better(const Scored& a, const Scored& b) {
  if (a.e.step_s != b.e.step_s) return a.e.step_s < b.e.step_s;
  if (a.e.memory_gib != b.e.memory_gib) return a.e.memory_gib < b.e.memory_gib;
  return a.c.ToString() < b.c.ToString();
}

Plan ToPlan(const Scored& s, const CostModel& cost, const PlanRequest& req) {
  const Candidate& c = s.c;
  const Evaluation& e = s.e;
  Plan plan;
  plan.set_tp(c.tp);
  plan.set_pp(c.pp);
  plan.set_dp(c.dp);
  plan.set_cp(c.cp);
  plan.set_vpp(c.vpp);
  plan.set_micro_batch(c.micro_batch);
  plan.set_zero_stage(c.zero_stage);
  plan.set_distributed_optimizer(c.distributed_optimizer);
  plan.set_recompute(c.recompute);
  plan.set_sequence_parallel(c.tp > 1 && c.sequence_parallel);
  plan.set_num_microbatches(c.num_microbatches);
  plan.set_global_batch(req.job.global_batch());
  plan.set_seq_length(cost.seq_length());
  const StepFlops flops = TrainingFlops(cost.model(), req.job.global_batch(),
                                        cost.seq_length(), c.recompute);
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
  for (int l : e.layers) plan.add_layers_per_stage(l);
  return plan;
}

Status ValidateRequest(const PlanRequest& req) {
  if (req.gpus <= 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("--gpus must be > 0, got ", req.gpus));
  }
  if (req.job.global_batch() <= 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("global batch must be > 0, got ", req.job.global_batch()));
  }
  if (req.job.seq_length() < 0 ||
      (req.job.seq_length() == 0 && req.model.seq_length() <= 0)) {
    return absl::InvalidArgumentError(
        "sequence length must be > 0 (give --seq or the model's seq_length)");
  }
  if (req.top_k <= 0) {
    return absl::InvalidArgumentError("--top must be > 0");
  }
  const int64_t capacity = topology::ClusterGpus(req.cluster);
  if (capacity > 0 && req.gpus > capacity) {
    return absl::InvalidArgumentError(
        absl::StrCat("cluster '", req.cluster.name(), "' has ", capacity,
                     " GPUs; --gpus ", req.gpus, " asks for more"));
  }
  const PlanConstraints& k = req.job.constraints();
  auto positive = [](bool has, int v, const char* name) -> Status {
    if (has && v <= 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("--fix ", name, " must be > 0, got ", v));
    }
    return absl::OkStatus();
  };
  RETURN_IF_ERROR(positive(k.has_tp(), k.tp(), "tp"));
  RETURN_IF_ERROR(positive(k.has_pp(), k.pp(), "pp"));
  RETURN_IF_ERROR(positive(k.has_dp(), k.dp(), "dp"));
  RETURN_IF_ERROR(positive(k.has_cp(), k.cp(), "cp"));
  RETURN_IF_ERROR(positive(k.has_vpp(), k.vpp(), "vpp"));
  RETURN_IF_ERROR(positive(k.has_micro_batch(), k.micro_batch(), "mbs"));
  if (k.has_zero_stage() && (k.zero_stage() < 0 || k.zero_stage() > 3)) {
    return absl::InvalidArgumentError(
        absl::StrCat("--fix zero must be 0-3, got ", k.zero_stage()));
  }
  return absl::OkStatus();
}

}  // namespace

StatusOr<PlanReport> PlanJob(const PlanRequest& req) {
  const auto start = std::chrono::steady_clock::now();
  RETURN_IF_ERROR(ValidateRequest(req));
  const ModelSpec& model = req.model;
  const ClusterSpec& cluster = req.cluster;
  const PlanConstraints& fix = req.job.constraints();
  const int gpn = cluster.gpus_per_node();
  const int64_t n = req.gpus;
  const int num_nodes = static_cast<int>((n + gpn - 1) / gpn);
  ASSIGN_OR_RETURN(std::vector<topology::NodeInfo> nodes,
                   topology::SelectNodes(cluster, num_nodes));
  const Network net(cluster, std::move(nodes));
  const CostModel cost(model, req.job, net);
  const int64_t batch = req.job.global_batch();
  const int seq = cost.seq_length();
  const int layers = model.num_layers();

  // TP must split heads, query groups, hidden and MLP evenly and stay
  // inside a node's NVLink domain (Narayanan §3.3 takeaway #1).
  std::vector<int> tps;
  for (int t : Divisors(gpn, gpn)) {
    if (model.num_attention_heads() % t == 0 &&
        model.num_query_groups() % t == 0 && model.hidden_size() % t == 0 &&
        model.ffn_hidden_size() % t == 0) {
      tps.push_back(t);
    }
  }
  // CP splits each sequence into 2 cp chunks for causal load balance
  // (Megatron context parallelism), so s % (2 cp) == 0.
  std::vector<int> cps = {1};
  for (int c = 2; c <= n && seq % (2 * c) == 0; c *= 2) cps.push_back(c);

  struct ZeroOption {
    int stage;
    bool distopt;
  };
  const ZeroOption zero_options[] = {
      {0, false}, {1, false}, {1, true}, {2, false}, {3, false}};
  const Recompute::Mode recomputes[] = {Recompute::none, Recompute::selective,
                                        Recompute::full};

  std::vector<Scored> top;
  Scored closest;
  double closest_ratio = 1e300;
  int64_t candidates = 0, feasible = 0;
  Evaluation eval;
  // On clusters with several NIC fabrics, stages that straddle two are
  // used only when no layout keeps every stage on one (RDMA does not cross
  // fabrics; Holmes).
  bool skipped_mixed = false;
  auto search = [&](bool allow_mixed) {
    for (int t : tps) {
      if (fix.has_tp() && fix.tp() != t) continue;
      for (int c : cps) {
        if (fix.has_cp() && fix.cp() != c) continue;
        if (n % (static_cast<int64_t>(t) * c) != 0) continue;
        const int64_t rest = n / (static_cast<int64_t>(t) * c);
        for (int p : Divisors(rest, layers)) {
          if (fix.has_pp() && fix.pp() != p) continue;
          const int64_t d = rest / p;
          if (fix.has_dp() && fix.dp() != d) continue;
          if (batch % d != 0) continue;
          for (int b : Divisors(batch / d, batch / d)) {
            if (fix.has_micro_batch() && fix.micro_batch() != b) continue;
            const int64_t m = batch / d / b;
            for (int v = 1; v <= std::max(1, layers / p); ++v) {
              if (fix.has_vpp() && fix.vpp() != v) continue;
              // Interleaving needs p > 1, a layer per virtual stage and
              // m % p == 0 (Megatron-LM schedules.py).
              if (v > 1 && (p == 1 || layers < p * v || m % p != 0)) {
                continue;
              }
              for (const ZeroOption& z : zero_options) {
                if (fix.has_zero_stage() && fix.zero_stage() != z.stage)
                  continue;
                if (fix.has_distributed_optimizer() &&
                    fix.distributed_optimizer() != z.distopt) {
                  continue;
                }
                if (z.stage > 0 && d * c == 1) continue;  // nothing to shard
                // DeepSpeed: ZeRO-2/3 are incompatible with pipeline
                // parallelism (PipelineEngine asserts zero stage < 2).
                if (z.stage >= 2 && p > 1) continue;
                // Megatron-LM shards optimizer state only as its distributed
                // optimizer (ZeRO-1); it has no ZeRO-2/3 in this sense.
                if (req.megatron_compatible && z.stage >= 1 && !z.distopt) {
                  continue;
                }
                for (Recompute::Mode rc : recomputes) {
                  if (fix.has_recompute() && fix.recompute() != rc) continue;
                  // Under fused attention selective recompute equals none.
                  if (rc == Recompute::selective && !fix.has_recompute() &&
                      model.attention() == AttentionKernel::flash) {
                    continue;
                  }
                  Candidate cand;
                  cand.tp = t;
                  cand.cp = c;
                  cand.pp = p;
                  cand.dp = static_cast<int>(d);
                  cand.micro_batch = b;
                  cand.num_microbatches = static_cast<int>(m);
                  cand.vpp = v;
                  cand.zero_stage = z.stage;
                  cand.distributed_optimizer = z.distopt;
                  cand.recompute = rc;
                  cand.sequence_parallel =
                      !fix.has_sequence_parallel() || fix.sequence_parallel();
                  cost.Evaluate(cand, &eval);
                  if (!eval.valid) continue;
                  if (eval.mixed_nic_stage && !allow_mixed) {
                    skipped_mixed = true;
                    continue;
                  }
                  ++candidates;
                  if (!eval.fits) {
                    const double ratio = eval.memory_gib / eval.capacity_gib;
                    if (ratio < closest_ratio) {
                      closest_ratio = ratio;
                      closest = {cand, eval};
                    }
                    continue;
                  }
                  ++feasible;
                  if (static_cast<int>(top.size()) < req.top_k ||
                      eval.step_s < top.back().e.step_s) {
                    Scored s{cand, eval};
                    auto pos =
                        std::upper_bound(top.begin(), top.end(), s, Better);
                    top.insert(pos, std::move(s));
                    if (static_cast<int>(top.size()) > req.top_k)
                      top.pop_back();
                  }
                }
              }
            }
          }
        }
      }
    }
  };
  search(/*allow_mixed=*/false);
  if (top.empty() && skipped_mixed) {
    candidates = feasible = 0;
    closest_ratio = 1e300;
    search(/*allow_mixed=*/true);
  }

  if (candidates == 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "no parallel layout of model '", model.name(), "' uses exactly ", n,
        " GPUs with global batch ", batch,
        (fix.ByteSizeLong() > 0 ? " and the pinned --fix values" : ""),
        ": tp must divide ", gpn,
        " (GPUs per node) and the attention heads, pp must be at most the ",
        layers,
        " layers, and dp = gpus/(tp pp cp) must divide the global "
        "batch"));
  }
  if (top.empty()) {
    return absl::ResourceExhaustedError(absl::StrFormat(
        "no plan of model '%s' fits on %d x %s: the closest, %s, needs %.1f "
        "GiB per GPU, has %.0f (stage %d: weights %.1f, gradients %.1f, "
        "optimizer %.1f, activations %.1f, reserve %.1f GiB)",
        model.name(), n, cluster.gpu().name(), closest.c.ToString(),
        closest.e.memory_gib, closest.e.capacity_gib, closest.e.critical_stage,
        closest.e.weights_gib, closest.e.gradients_gib,
        closest.e.optimizer_state_gib, closest.e.activations_gib,
        closest.e.reserve_gib));
  }

  PlanReport report;
  report.set_model(model.name());
  report.set_cluster(cluster.name());
  report.set_gpus(static_cast<int>(n));
  for (size_t i = 0; i < top.size(); ++i) {
    Plan* plan = report.add_plans();
    *plan = ToPlan(top[i], cost, req);
    if (i == 0 && req.with_placement) {
      *plan->mutable_placement() =
          BuildPlacement(top[i].c, top[i].e.layers, net);
    }
  }
  SearchStats* stats = report.mutable_search();
  stats->set_candidates(candidates);
  stats->set_feasible(feasible);
  stats->set_elapsed_s(
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start)
          .count());
  GetLogger("PLAN")->info("searched {} candidates ({} fit) in {:.3f} s",
                          candidates, feasible, stats->elapsed_s());
  return report;
}

}  // namespace strata::planner
