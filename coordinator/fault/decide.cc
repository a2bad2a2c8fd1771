#include "coordinator/fault/decide.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"

namespace strata::coordinator {

namespace {

using Act = FaultDecision::Act;

// A refused evict or rebalance: a hang restarts anyway, anything else is
// reported only.
FaultDecision Refused(const FaultCase& c, const char* what,
                      absl::string_view why) {
  const bool hang = c.kind == fault::EventKind::kHang;
  const char* kind = fault::EventKindName(c.kind);
  FaultDecision d;
  d.act = hang ? Act::kRestart : Act::kNone;
  d.event_kind = "fault_action";
  d.event_text = absl::StrCat(hang ? "restart" : "report", " after ", kind, " (",
                              what, " refused: ", why, ")");
  if (hang) d.reason = absl::StrCat(kind, ": ", c.assessed.summary);
  return d;
}

std::string Join(absl::string_view a, absl::string_view sep, absl::string_view b) {
  return b.empty() ? std::string(a) : absl::StrCat(a, sep, b);
}

// The eviction floor, or why evicting `c.assessed.node` is refused ("").
std::string EvictRefusal(const FaultCase& c) {
  if (c.assessed.node.empty()) return "the finding names no node";
  const int left = c.nodes - 1;
  const int floor = c.launch_nodes == 0       ? 1
                    : c.launch_min_nodes > 0 ? c.launch_min_nodes
                                             : c.launch_nodes;
  if (left >= floor) return "";
  return absl::StrCat("it would leave ", left, " node(s), below ",
                      c.launch_min_nodes > 0 ? "launch.min_nodes"
                                             : "launch.nodes",
                      " ", floor);
}

// Why the finding cannot be rebalanced before asking the planner ("").
std::string RebalanceRefusal(const FaultCase& c) {
  if (c.kind == fault::EventKind::kSlowLink) {
    return "a slow link is not slow compute (evict takes the node)";
  }
  if (!c.has_model) {
    return "the job has no launch.model: only the planner splits layers by "
           "speed";
  }
  if (c.assessed.node.empty() || !(c.slowdown > 1)) {
    return "the finding names no node or no slowdown";
  }
  return "";
}

FaultDecision Rebalance(const FaultCase& c, const std::string& cost,
                        const PredictReplan& predict) {
  if (std::string refused = RebalanceRefusal(c); !refused.empty()) {
    return Refused(c, "rebalance", refused);
  }
  const std::string& node = c.assessed.node;
  const double speed = c.node_speed / c.slowdown;
  StatusOr<ReplanPrediction> next = predict(node, speed);
  if (!next.ok()) return Refused(c, "rebalance", next.status().message());
  // As it runs, the synchronous job goes at its slowest rank's pace: the
  // current plan's prediction times the slowdown.
  const double now_s = c.plan_step_s * c.slowdown;
  const std::string figures = absl::StrFormat(
      "at %.2fx speed the planner predicts %.3f s/step with tp=%d pp=%d dp=%d "
      "layers [%s], against %.3f s/step as it runs",
      speed, next->step_s, next->tp, next->pp, next->dp,
      absl::StrJoin(next->layers_per_stage, ","), now_s);
  // A re-plan that gains under 5% does not repay a restart's uncertainty.
  if (!(next->step_s > 0) || next->step_s > 0.95 * now_s) {
    return Refused(c, "rebalance", absl::StrCat("no gain: ", figures));
  }
  const char* kind = fault::EventKindName(c.kind);
  FaultDecision d;
  d.act = Act::kRebalance;
  d.node = node;
  d.node_speed = speed;
  d.event_kind = "rebalanced";
  d.event_text = absl::StrCat("node ", node, " after ", kind, ": ",
                              c.assessed.summary, "; ",
                              Join(figures, "; ", cost));
  d.reason = absl::StrCat(kind, ": ", c.assessed.summary,
                          " (re-planned with node ", node,
                          " at its measured speed)");
  return d;
}

FaultDecision Evict(const FaultCase& c, const std::string& cost) {
  if (std::string refused = EvictRefusal(c); !refused.empty()) {
    return Refused(c, "evict", refused);
  }
  const char* kind = fault::EventKindName(c.kind);
  const std::string& node = c.assessed.node;
  FaultDecision d;
  d.act = Act::kEvict;
  d.node = node;
  d.event_kind = "evicted";
  d.event_text =
      Join(absl::StrCat("node ", node, " after ", kind, ": ",
                        c.assessed.summary),
           "; ", cost);
  d.reason = absl::StrCat(kind, ": ", c.assessed.summary, " (node ", node,
                          " evicted)");
  return d;
}

}  // namespace

FaultAssessment Assess(const fault::FaultEvent& e,
                       const fault::ResolvedPolicy& policy,
                       const std::optional<std::string>& slow_link_suspect) {
  FaultAssessment a;
  switch (e.kind) {
    case fault::EventKind::kUnbalancedPlan:
      a.action = FaultPolicy::report;
      a.slows_job = false;
      a.summary = absl::StrFormat(
          "stages differ %.2fx as the plan predicted, found at step %d",
          e.slowdown, e.step);
      return a;
    case fault::EventKind::kPlanMismatch:
      // Slow hardware (or a straggler) like a rank slower than its peers;
      // it finds a slow node whose stage has no peers doing the same work.
      a.action = policy.straggler;
      a.node = e.node;
      a.summary = absl::StrFormat(
          "stage %d%s computes %.2fx slower than planned relative to the "
          "other stages, found at step %d",
          e.stage, e.node.empty() ? "" : absl::StrCat(" on ", e.node),
          e.slowdown, e.step);
      return a;
    case fault::EventKind::kSlowLink:
      // Evicting for a link takes the node every slow pair includes; with
      // none (a single pair), the finding names no node to take.
      a.action = policy.slow_link;
      a.node = slow_link_suspect.value_or("");
      a.summary = absl::StrFormat(
          "link %s -> %s sends %.2fx slower than its reference, found at "
          "step %d",
          e.node, e.peer_node, e.slowdown, e.step);
      return a;
    case fault::EventKind::kHang:
      a.action = policy.hang;
      a.node = e.node;
      a.summary = e.evidence;
      return a;
    case fault::EventKind::kStraggler:
      break;
  }
  a.action = policy.straggler;
  a.node = e.node;
  a.summary = absl::StrFormat(
      "rank %d on %s is %.2fx slower (%s), confirmed at step %d", e.rank,
      e.node, e.slowdown, e.section, e.step);
  if (e.self_reported && a.action != FaultPolicy::report) {
    // Evidence against a node must come from its own ranks and the flight
    // recorders: a peer's self-reported waits may only inform.
    a.summary += absl::StrFormat(
        " (reported only, policy %s not applied: its arrivals are the waits "
        "the ranks report, which another rank could forge)",
        fault::ActionName(a.action));
    a.action = FaultPolicy::report;
  }
  return a;
}

std::pair<bool, std::string> WorthRestart(const FaultCase& c,
                                          const FaultCosts& costs) {
  // A hang makes no progress at all: always worth it.
  if (c.kind == fault::EventKind::kHang) return {true, ""};
  const int64_t remaining = costs.total_steps - costs.latest_step;
  if (costs.total_steps <= 0) {
    return {false, "the ranks do not report their total steps, so the time "
                   "the slowdown loses cannot be predicted"};
  }
  // The job runs at the slow rank's pace: each remaining step takes
  // (1 - 1/slowdown) of its time more than without it (act when slowdown x
  // remaining steps x step time exceeds the restart cost).
  const double step_s = costs.median_step_s;
  const double slowdown = std::max(1.0, c.slowdown);
  const double loss_s =
      step_s * (1 - 1 / slowdown) * std::max<int64_t>(0, remaining);
  const bool have = costs.measured_restart_s.has_value();
  const double cost_s = have ? *costs.measured_restart_s
                             : costs.policy_restart_s;
  std::string why = absl::StrFormat(
      "predicted loss %.1f s (%d remaining steps x %.3f s x (1 - 1/%.2f)) vs "
      "restart cost %.1f s (%s)",
      loss_s, remaining, step_s, slowdown, cost_s,
      have ? "measured on this job" : "fault.restart_cost_s");
  return {loss_s > cost_s, why};
}

FaultDecision DecideFault(const FaultCase& c, const FaultCosts& costs,
                          const PredictReplan& predict) {
  const FaultPolicy::Action action = c.assessed.action;
  if (action == FaultPolicy::report) return {};
  const char* kind = fault::EventKindName(c.kind);
  auto [worth, cost] = WorthRestart(c, costs);
  if (!worth) {
    FaultDecision d;
    d.event_kind = "fault_action";
    d.event_text = absl::StrCat("report after ", kind, " (policy ",
                                fault::ActionName(action),
                                " not applied: ", cost, ")");
    return d;
  }
  if (action == FaultPolicy::rebalance) return Rebalance(c, cost, predict);
  if (action == FaultPolicy::evict) return Evict(c, cost);
  FaultDecision d;
  d.act = Act::kRestart;
  d.event_kind = "fault_action";
  d.event_text = Join(absl::StrCat(fault::ActionName(action), " after ", kind),
                      ": ", cost);
  d.reason = absl::StrCat(kind, ": ", c.assessed.summary);
  return d;
}

}  // namespace strata::coordinator
