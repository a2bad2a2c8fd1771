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
      "# NOTE: this is not the planner's best plan. %s.\n"
      "#   emitted: %s: %.3f s/step predicted\n"
      "#   best:    %s: %.3f s/step predicted (the emitted plan is %.1f%% "
      "slower)\n"
      "#   differs: %s\n",
      kMegatronConstraint, PlanConfiguration(out.plan), out.plan.step_time_s(),
      PlanConfiguration(b), b.step_time_s(), 100 * slower, diff);
  return out;
}

}  // namespace strata::planner
