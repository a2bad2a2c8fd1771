#include "planner/launch_plan.h"

#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"

namespace strata::planner {
namespace {

std::string ZeroText(const Plan& p) {
  return p.distributed_optimizer() ? "1 (distributed optimizer)"
                                   : std::to_string(p.zero_stage());
}

// Why PlanRequest::megatron_compatible drops plans (search.cc ZeroAllowed).
constexpr char kMegatronConstraint[] =
    "Megatron-LM shards optimizer state only as its distributed optimizer: "
    "ZeRO stage 0, or 1 with --use-distributed-optimizer";

// The best plan's layout with Megatron's distributed optimizer and the
// optimizer state on the GPU: its predicted step, or why it does not fit.
std::string BestLayoutWithDistopt(const PlanRequest& request, const Plan& b) {
  PlanRequest probe = request;
  probe.megatron_compatible = true;
  probe.top_k = 1;
  probe.with_placement = false;
  PlanConstraints* f = probe.job.mutable_constraints();
  f->set_tp(b.tp());
  f->set_pp(b.pp());
  f->set_dp(b.dp());
  f->set_cp(b.cp());
  f->set_vpp(b.vpp());
  f->set_micro_batch(b.micro_batch());
  f->set_recompute(b.recompute());
  if (b.ep() > 1 || b.etp() > 1) {
    f->set_ep(b.ep());
    f->set_etp(b.etp());
  }
  f->set_zero_stage(1);
  f->set_distributed_optimizer(true);
  f->set_offload(Offload::none);
  StatusOr<PlanReport> r = PlanJob(probe);
  if (r.ok()) {
    return absl::StrFormat(
        "with --use-distributed-optimizer that layout would take %.3f s/step "
        "and %.1f GiB per GPU",
        r->plans(0).step_time_s(), r->plans(0).memory_gib_per_gpu());
  }
  const std::string msg(r.status().message());
  const size_t at = msg.find("needs ");
  const size_t end = msg.find(" (stage", at);
  if (r.status().code() == absl::StatusCode::kResourceExhausted &&
      at != std::string::npos && end != std::string::npos) {
    return absl::StrCat(
        "with --use-distributed-optimizer that layout does not fit: it ",
        msg.substr(at, end - at));
  }
  return "";
}

// Why the emitted plan differs, in Megatron-LM's terms: the optimizer
// sharding Megatron lacks, what that costs the best layout there, and the
// offload the emitted plan needs to fit.
std::vector<std::string> WhyDifferent(const PlanRequest& request,
                                      const Plan& emitted, const Plan& b) {
  std::vector<std::string> why;
  if (b.zero_stage() >= 1 && !b.distributed_optimizer()) {
    why.push_back(absl::StrFormat(
        "the best plan shards the optimizer state over its %d data-parallel "
        "ranks as ZeRO stage %d and keeps 16-bit gradients (2 bytes per "
        "parameter%s); Megatron-LM has no ZeRO-%d: it shards the optimizer "
        "state only with --use-distributed-optimizer, whose gradient buffer "
        "(main_grad) is fp32, 4 bytes per parameter, on every rank",
        b.dp() * b.cp(), b.zero_stage(),
        b.zero_stage() >= 2 ? ", sharded too" : "", b.zero_stage()));
    const std::string alt = BestLayoutWithDistopt(request, b);
    if (!alt.empty()) why.push_back(alt);
  } else if (b.zero_stage() >= 1 && b.distributed_optimizer() &&
             emitted.zero_stage() == 0) {
    why.push_back("the emitted plan runs without --use-distributed-optimizer");
  }
  if (emitted.offload() != Offload::none && b.offload() == Offload::none) {
    why.push_back(absl::StrFormat(
        "the emitted plan fits in GPU memory only by keeping the optimizer "
        "states in CPU memory (--optimizer-cpu-offload "
        "--optimizer-offload-fraction 1.0, CPU Adam): %.3f s per step of "
        "host work that is not hidden",
        emitted.breakdown().offload_s()));
  }
  return why;
}

}  // namespace

std::string PlanConfiguration(const Plan& p) {
  std::string s = absl::StrCat("tp=", p.tp(), " pp=", p.pp(), " dp=", p.dp(),
                               " cp=", p.cp());
  if (p.ep() > 1 || p.etp() > 1) {
    absl::StrAppend(&s, " ep=", p.ep(), " etp=", p.etp());
  }
  absl::StrAppend(&s, " vpp=", p.vpp(), " mbs=", p.micro_batch(),
                  " zero=", p.zero_stage(),
                  p.distributed_optimizer() ? " distopt=1" : "",
                  " recompute=", Recompute::Mode_Name(p.recompute()));
  if (p.offload() != Offload::none) {
    absl::StrAppend(&s, " offload=", Offload::Kind_Name(p.offload()));
  }
  if (p.tp() > 1 && !p.sequence_parallel()) s += " sp=0";
  return s;
}

std::string PlanDifferences(const Plan& a, const Plan& b) {
  std::vector<std::string> d;
  auto cmp = [&](const char* name, auto x, auto y) {
    if (x != y) d.push_back(absl::StrCat(name, " ", x, " vs ", y));
  };
  cmp("tp", a.tp(), b.tp());
  cmp("pp", a.pp(), b.pp());
  cmp("dp", a.dp(), b.dp());
  cmp("cp", a.cp(), b.cp());
  cmp("ep", a.ep(), b.ep());
  cmp("etp", a.etp(), b.etp());
  cmp("vpp", a.vpp(), b.vpp());
  cmp("mbs", a.micro_batch(), b.micro_batch());
  if (a.zero_stage() != b.zero_stage() ||
      a.distributed_optimizer() != b.distributed_optimizer()) {
    d.push_back(absl::StrCat("zero ", ZeroText(a), " vs ", ZeroText(b)));
  }
  if (a.recompute() != b.recompute()) {
    d.push_back(absl::StrCat("recompute ", Recompute::Mode_Name(a.recompute()),
                             " vs ", Recompute::Mode_Name(b.recompute())));
  }
  if (a.offload() != b.offload()) {
    d.push_back(absl::StrCat("offload ", Offload::Kind_Name(a.offload()),
                             " vs ", Offload::Kind_Name(b.offload())));
  }
  cmp("sp", a.sequence_parallel() ? 1 : 0, b.sequence_parallel() ? 1 : 0);
  if (a.layers_per_stage_size() == b.layers_per_stage_size()) {
    for (int i = 0; i < a.layers_per_stage_size(); ++i) {
      if (a.layers_per_stage(i) != b.layers_per_stage(i)) {
        d.push_back("layers per stage");
        break;
      }
    }
  }
  return absl::StrJoin(d, ", ");
}

StatusOr<LaunchPlan> PlanForLaunch(const PlanRequest& request) {
  PlanRequest constrained = request;
  constrained.megatron_compatible = true;
  constrained.top_k = 1;
  PlanRequest unconstrained = request;
  unconstrained.megatron_compatible = false;
  unconstrained.top_k = 1;
  unconstrained.with_placement = false;
  // No launcher runs DualPipe, eager mode or SDPA costs: PlanJob's refusal
  // (search.cc) says so, and
  // the Megatron constraint note below would not be the reason.
  if (request.job.constraints().dualpipe() ||
      request.job.constraints().eager() || request.job.constraints().sdpa()) {
    StatusOr<PlanReport> refused = PlanJob(constrained);
    if (!refused.ok()) return refused.status();
    return absl::InternalError(
        "a DualPipe, eager or SDPA plan was accepted for --emit");
  }
  StatusOr<PlanReport> best = PlanJob(unconstrained);
  StatusOr<PlanReport> launch = PlanJob(constrained);
  if (!launch.ok()) {
    // The unconstrained search succeeding means the request is valid:
    // the constraint (or a --fix value it forbids, e.g. zero=2) is why.
    if (!best.ok()) return launch.status();
    return absl::Status(
        launch.status().code(),
        absl::StrCat(launch.status().message(), " (", kMegatronConstraint,
                     "; without that constraint the best plan is ",
                     PlanConfiguration(best->plans(0)),
                     ", which `strata plan` without --emit shows)"));
  }
  LaunchPlan out;
  out.plan = launch->plans(0);
  if (!best.ok()) return out;  // e.g. its own time budget ran out
  const Plan& b = best->plans(0);
  const std::string diff = PlanDifferences(out.plan, b);
  if (diff.empty()) return out;
  out.differs = true;
  out.unconstrained = b;
  const double slower = out.plan.step_time_s() / b.step_time_s() - 1;
  out.note = absl::StrFormat(
      "# NOTE: this is not the planner's best plan (the table's first row): "
      "Megatron-LM cannot run that one.\n"
      "#   emitted: %s: %.3f s/step predicted\n"
      "#   best:    %s: %.3f s/step predicted (the emitted plan is %.1f%% "
      "slower)\n"
      "#   differs: %s\n",
      PlanConfiguration(out.plan), out.plan.step_time_s(),
      PlanConfiguration(b), b.step_time_s(), 100 * slower, diff);
  for (const std::string& why : WhyDifferent(request, out.plan, b)) {
    absl::StrAppend(&out.note, "#   why: ", why, "\n");
  }
  return out;
}

}  // namespace strata::planner
