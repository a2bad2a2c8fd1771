#include "cli/plan_format.h"

#include <algorithm>
#include <map>
#include <set>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"

namespace strata::cli {
namespace {

std::string ZeroName(const Plan& p) {
  if (p.distributed_optimizer()) return "1 (distopt)";
  return absl::StrCat(p.zero_stage());
}

// The step-time terms, in display order.
std::vector<std::pair<std::string, double>> TimeTerms(const Plan& p) {
  const Breakdown& b = p.breakdown();
  return {{"compute", b.compute_s()},    {"recompute", b.recompute_s()},
          {"TP comm", b.tp_comm_s()},    {"CP comm", b.cp_comm_s()},
          {"PP p2p", b.pp_comm_s()},     {"bubble", b.bubble_s()},
          {"DP comm", b.dp_comm_s()},    {"optimizer", b.optimizer_s()},
          {"all-to-all", b.a2a_comm_s()}, {"offload", b.offload_s()},
          {"core sharing", b.core_sharing_s()}};
}

std::string Ranges(const std::vector<int>& sorted) {
  std::vector<std::string> parts;
  for (size_t i = 0; i < sorted.size();) {
    size_t j = i;
    while (j + 1 < sorted.size() && sorted[j + 1] == sorted[j] + 1) ++j;
    parts.push_back(j == i ? absl::StrCat(sorted[i])
                           : absl::StrCat(sorted[i], "-", sorted[j]));
    i = j + 1;
  }
  return absl::StrJoin(parts, ",");
}

void Explain(const Plan& p, const Plan& best, bool is_best, std::string* out) {
  const Breakdown& b = p.breakdown();
  std::vector<std::string> terms;
  for (const auto& [name, v] : TimeTerms(p)) {
    if (v <= 0) continue;
    terms.push_back(absl::StrFormat("%s %.3f s (%.0f%%)", name, v,
                                    100 * v / p.step_time_s()));
  }
  absl::StrAppend(out, "      time    ", absl::StrJoin(terms, ", "), "\n");
  if (p.ep() > 1 || p.etp() > 1 || b.a2a_comm_s() > 0) {
    absl::StrAppendFormat(
        out,
        "              MoE all-to-all (ep=%d, etp=%d) %.3f s, not overlapped; "
        "%.0f%% of its bytes leave the node\n",
        p.ep(), p.etp(), b.a2a_comm_s(), 100 * b.a2a_inter_node_fraction());
  }
  if (b.core_sharing_s() > 0) {
    // CPU ranks that outnumber their cores (docs/planner.md "Calibration").
    absl::StrAppendFormat(
        out,
        "              core sharing %.3f s: the busiest node's work over its "
        "cores exceeds the slowest stage; %.3f s of it is cores idle in the "
        "1F1B fill and drain\n",
        b.core_sharing_s(), b.fill_drain_s());
  }
  if (b.dp_comm_total_s() > 0) {
    absl::StrAppendFormat(out,
                          "              DP/ZeRO traffic %.3f s, %.3f s of it "
                          "hidden behind compute\n",
                          b.dp_comm_total_s(),
                          b.dp_comm_total_s() - b.dp_comm_s());
  }
  absl::StrAppendFormat(
      out,
      "      memory  weights %.1f + gradients %.1f + optimizer %.1f + "
      "activations %.1f + logits %.1f%s%s + reserve %.1f = %.1f GiB on stage "
      "%d\n",
      b.weights_gib(), b.gradients_gib(), b.optimizer_state_gib(),
      b.activations_gib(), b.logits_gib(),
      b.zero3_buffers_gib() > 0
          ? absl::StrFormat(" + ZeRO-3 buffers %.1f", b.zero3_buffers_gib())
          : std::string(),
      b.fp8_buffers_gib() > 0
          ? absl::StrFormat(" + FP8 copies %.1f", b.fp8_buffers_gib())
          : std::string(),
      b.reserve_gib(), p.memory_gib_per_gpu(), b.critical_stage());
  if (b.expert_states_gib() > 0) {
    absl::StrAppendFormat(out,
                          "              of which routed experts' weights, "
                          "gradients and optimizer %.1f GiB\n",
                          b.expert_states_gib());
  }
  if (p.offload() != Offload::none) {
    absl::StrAppendFormat(
        out,
        "      offload %s: optimizer states in %s, %.0f GiB CPU memory%s per "
        "node; host step %.3f s, %.3f s of it not hidden\n",
        Offload::Kind_Name(p.offload()),
        p.offload() == Offload::cpu ? "CPU memory" : "NVMe",
        b.cpu_memory_gib_per_node(),
        p.offload() == Offload::nvme
            ? absl::StrFormat(" and %.0f GiB NVMe", b.nvme_gib_per_node())
            : std::string(),
        b.offload_total_s(), b.offload_s());
  }
  std::vector<std::string> layers;
  for (int l : p.layers_per_stage()) layers.push_back(absl::StrCat(l));
  absl::StrAppendFormat(
      out, "      layers  [%s] per stage, %d micro-batches of %d\n",
      absl::StrJoin(layers, ","), p.num_microbatches(), p.micro_batch());
  if (!is_best) {
    // The two terms that grew most against the winner say why it lost.
    std::vector<std::pair<double, std::string>> diffs;
    auto mine = TimeTerms(p), theirs = TimeTerms(best);
    for (size_t i = 0; i < mine.size(); ++i) {
      diffs.push_back({mine[i].second - theirs[i].second, mine[i].first});
    }
    std::sort(diffs.rbegin(), diffs.rend());
    std::vector<std::string> why;
    for (size_t i = 0; i < 2 && i < diffs.size() && diffs[i].first > 1e-4;
         ++i) {
      why.push_back(
          absl::StrFormat("%s +%.3f s", diffs[i].second, diffs[i].first));
    }
    absl::StrAppendFormat(out, "      vs #1   %+.3f s per step%s%s\n",
                          p.step_time_s() - best.step_time_s(),
                          why.empty() ? "" : ": ", absl::StrJoin(why, ", "));
  }
}

void ExplainPlacement(const Placement& pl, std::string* out) {
  std::map<std::string, std::pair<int, int>> kinds;  // kind -> (groups, size)
  std::map<std::string, std::string> example;
  std::map<int, int> node_of_rank;
  for (const RankPlacement& r : pl.ranks()) node_of_rank[r.rank()] = r.node();
  std::map<std::string, int> max_nodes;
  for (const Group& g : pl.groups()) {
    auto& k = kinds[g.kind()];
    ++k.first;
    k.second = g.ranks_size();
    std::set<int> nodes;
    for (int r : g.ranks()) nodes.insert(node_of_rank[r]);
    max_nodes[g.kind()] =
        std::max(max_nodes[g.kind()], static_cast<int>(nodes.size()));
    if (!example.count(g.kind())) {
      std::vector<int> ranks(g.ranks().begin(), g.ranks().end());
      example[g.kind()] =
          ranks.size() <= 8
              ? absl::StrJoin(ranks, ",")
              : absl::StrCat(absl::StrJoin(std::vector<int>(ranks.begin(),
                                                            ranks.begin() + 8),
                                           ","),
                             ",...");
    }
  }
  absl::StrAppend(out, "\n  placement (order ", pl.order(), ", ",
                  pl.ranks_size(), " ranks):\n");
  for (const char* kind : {"tp", "cp", "dp", "pp", "ep", "etp"}) {
    if (!kinds.count(kind)) continue;
    absl::StrAppendFormat(out,
                          "    %-3s %5d groups of %-5d each on <= %d node(s); "
                          "group 0 = ranks {%s}\n",
                          kind, kinds[kind].first, kinds[kind].second,
                          max_nodes[kind], example[kind]);
  }
  for (const StageInfo& s : pl.stages()) {
    std::vector<int> nodes(s.nodes().begin(), s.nodes().end());
    absl::StrAppendFormat(out, "    stage %-3d %3d layers  nodes %s  (%s)\n",
                          s.pp_rank(), s.num_layers(), Ranges(nodes),
                          s.nic_type());
  }
}

}  // namespace

std::string FormatPlanTable(const PlanReport& report,
                            const ClusterSpec& cluster, bool explain) {
  std::string out;
  const Plan& best = report.plans(0);
  absl::StrAppendFormat(
      &out,
      "strata plan: %s on %d x %s (%s), global batch %d x %d tokens\n"
      "searched %d candidates (%d fit in memory) in %.3f s\n\n",
      report.model(), report.gpus(), cluster.gpu().name(), report.cluster(),
      best.global_batch(), best.seq_length(), report.search().candidates(),
      report.search().feasible(), report.search().elapsed_s());
  if (best.active_params_b() < best.params_b() ||
      (!best.precision().empty() && best.precision() != "bf16")) {
    absl::StrAppendFormat(&out,
                          "%.1fB parameters (%.1fB active per token), "
                          "precision %s\n\n",
                          best.params_b(), best.active_params_b(),
                          best.precision());
  }
  bool moe = false, offload = false;
  for (const Plan& p : report.plans()) {
    moe |= p.ep() > 1 || p.etp() > 1;
    offload |= p.offload() != Offload::none;
  }
  if (!report.calibration().empty()) {
    absl::StrAppend(&out, report.calibration(), "\n\n");
  }
  absl::StrAppendFormat(&out,
                        "     #  %3s %3s %5s %3s%s %3s %3s %-11s%s %-9s %9s "
                        "%10s %8s %6s %11s\n",
                        "TP", "PP", "DP", "CP",
                        moe ? absl::StrFormat(" %3s %3s", "EP", "ETP") : "",
                        "VPP", "MBS", "ZeRO",
                        offload ? absl::StrFormat(" %-7s", "offload") : "",
                        "recompute", "step (s)",
                        "tokens/s", "TFLOP/s", "MFU", "mem (GiB)");
  for (int i = 0; i < report.plans_size(); ++i) {
    const Plan& p = report.plans(i);
    absl::StrAppendFormat(
        &out,
        "  %s %2d  %3d %3d %5d %3d%s %3d %3d %-11s%s %-9s %9.3f %10.0f %8.1f "
        "%5.1f%% %5.1f / %-3.0f\n",
        i == 0 ? "*" : " ", i + 1, p.tp(), p.pp(), p.dp(), p.cp(),
        moe ? absl::StrFormat(" %3d %3d", p.ep(), p.etp()) : "", p.vpp(),
        p.micro_batch(), ZeroName(p),
        offload ? absl::StrFormat(" %-7s", Offload::Kind_Name(p.offload()))
                : "",
        Recompute::Mode_Name(p.recompute()),
        p.step_time_s(), p.tokens_per_s(), p.tflops_per_gpu(), 100 * p.mfu(),
        p.memory_gib_per_gpu(), cluster.gpu().memory_gib());
    if (explain) Explain(p, best, i == 0, &out);
  }
  absl::StrAppend(&out,
                  "\n  TFLOP/s and MFU count model FLOPs per GPU (no "
                  "recompute); '*' marks the fastest plan.\n");
  if (explain) {
    for (const std::string& note : report.notes()) {
      absl::StrAppend(&out, "  note: ", note, "\n");
    }
  }
  if (explain && best.has_placement()) ExplainPlacement(best.placement(), &out);
  return out;
}

}  // namespace strata::cli
