// coordinator/fault/decide.h on a table of cases: which action a finding
// gets, the eviction floor, the restart-worth comparison and the "re-plan
// must gain 5%" rule, with the event texts `strata events` shows.
#include "coordinator/fault/decide.h"

#include <gtest/gtest.h>

#include "absl/strings/str_cat.h"

#include <string>
#include <vector>

// Cases name only the fields they set.
#pragma GCC diagnostic ignored "-Wmissing-field-initializers"

namespace strata::coordinator {
namespace {

using Act = FaultDecision::Act;

struct Case {
  std::string name;
  fault::EventKind kind = fault::EventKind::kStraggler;
  FaultPolicy::Action action = FaultPolicy::restart;
  double slowdown = 2.0;
  std::string node = "n1";
  int nodes = 2, launch_nodes = 2, launch_min_nodes = 0;
  bool has_model = true;
  int64_t total = 1000, latest = 100;
  std::optional<double> measured_restart_s;
  // The planner's prediction for a rebalance (step seconds; < 0: an error).
  double replan_step_s = 0.5;
  // Expected.
  Act act = Act::kNone;
  std::string event_kind, event_text, reason;
  int planner_calls = 0;
};

constexpr char kSummary[] = "rank 3 on n1 is 2.00x slower";
constexpr char kWorth[] =
    "predicted loss 450.0 s (900 remaining steps x 1.000 s x (1 - 1/2.00)) vs "
    "restart cost 30.0 s (fault.restart_cost_s)";

std::vector<Case> Cases() {
  std::vector<Case> c;
  c.push_back({.name = "report_only", .action = FaultPolicy::report});
  c.push_back(
      {.name = "unknown_total_steps_is_not_worth_it",
       .total = 0,
       .event_kind = "fault_action",
       .event_text = "report after straggler (policy restart not applied: the "
                     "ranks do not report their total steps, so the time the "
                     "slowdown loses cannot be predicted)"});
  c.push_back({.name = "restart_when_the_loss_exceeds_the_cost",
               .act = Act::kRestart,
               .event_kind = "fault_action",
               .event_text = absl::StrCat("restart after straggler: ", kWorth),
               .reason = absl::StrCat("straggler: ", kSummary)});
  c.push_back(
      {.name = "no_restart_near_the_end",
       .latest = 990,
       .event_kind = "fault_action",
       .event_text =
           "report after straggler (policy restart not applied: predicted "
           "loss 5.0 s (10 remaining steps x 1.000 s x (1 - 1/2.00)) vs "
           "restart cost 30.0 s (fault.restart_cost_s))"});
  c.push_back(
      {.name = "measured_restart_cost_wins_over_the_policy",
       .latest = 990,
       .measured_restart_s = 2.0,
       .act = Act::kRestart,
       .event_kind = "fault_action",
       .event_text = "restart after straggler: predicted loss 5.0 s (10 "
                     "remaining steps x 1.000 s x (1 - 1/2.00)) vs restart "
                     "cost 2.0 s (measured on this job)",
       .reason = absl::StrCat("straggler: ", kSummary)});
  c.push_back({.name = "hang_is_always_worth_a_restart",
               .kind = fault::EventKind::kHang,
               .total = 0,
               .act = Act::kRestart,
               .event_kind = "fault_action",
               .event_text = "restart after hang",
               .reason = absl::StrCat("hang: ", kSummary)});
  c.push_back({.name = "evict_refused_at_the_launch_nodes_floor",
               .action = FaultPolicy::evict,
               .event_kind = "fault_action",
               .event_text = "report after straggler (evict refused: it would "
                             "leave 1 node(s), below launch.nodes 2)"});
  c.push_back({.name = "evict_down_to_min_nodes",
               .action = FaultPolicy::evict,
               .launch_min_nodes = 1,
               .act = Act::kEvict,
               .event_kind = "evicted",
               .event_text = absl::StrCat("node n1 after straggler: ", kSummary,
                                          "; ", kWorth),
               .reason = absl::StrCat("straggler: ", kSummary,
                                      " (node n1 evicted)")});
  c.push_back({.name = "evict_refused_below_min_nodes",
               .action = FaultPolicy::evict,
               .nodes = 2, .launch_nodes = 4, .launch_min_nodes = 2,
               .event_kind = "fault_action",
               .event_text = "report after straggler (evict refused: it would "
                             "leave 1 node(s), below launch.min_nodes 2)"});
  c.push_back({.name = "elastic_job_keeps_one_node",
               .action = FaultPolicy::evict,
               .nodes = 1, .launch_nodes = 0,
               .event_kind = "fault_action",
               .event_text = "report after straggler (evict refused: it would "
                             "leave 0 node(s), below launch.nodes 1)"});
  c.push_back({.name = "hang_without_a_node_restarts_instead_of_evicting",
               .kind = fault::EventKind::kHang,
               .action = FaultPolicy::evict,
               .node = "",
               .act = Act::kRestart,
               .event_kind = "fault_action",
               .event_text = "restart after hang (evict refused: the finding "
                             "names no node)",
               .reason = absl::StrCat("hang: ", kSummary)});
  c.push_back({.name = "rebalance_refuses_a_slow_link",
               .kind = fault::EventKind::kSlowLink,
               .action = FaultPolicy::rebalance,
               .event_kind = "fault_action",
               .event_text = "report after slow_link (rebalance refused: a "
                             "slow link is not slow compute (evict takes the "
                             "node))"});
  c.push_back({.name = "rebalance_needs_a_model",
               .action = FaultPolicy::rebalance,
               .has_model = false,
               .event_kind = "fault_action",
               .event_text = "report after straggler (rebalance refused: the "
                             "job has no launch.model: only the planner "
                             "splits layers by speed)"});
  c.push_back({.name = "rebalance_needs_a_node",
               .action = FaultPolicy::rebalance,
               .node = "",
               .event_kind = "fault_action",
               .event_text = "report after straggler (rebalance refused: the "
                             "finding names no node or no slowdown)"});
  // As it runs: 1.0 s/step x 2.0 = 2.0 s; 1.91 s gains 4.5%, 1.9 s 5%.
  c.push_back({.name = "rebalance_gaining_under_5_percent_is_refused",
               .action = FaultPolicy::rebalance,
               .replan_step_s = 1.91,
               .event_kind = "fault_action",
               .event_text = "report after straggler (rebalance refused: no "
                             "gain: at 0.50x speed the planner predicts 1.910 "
                             "s/step with tp=1 pp=2 dp=1 layers [5,3], against "
                             "2.000 s/step as it runs)",
               .planner_calls = 1});
  c.push_back({.name = "rebalance_gaining_5_percent",
               .action = FaultPolicy::rebalance,
               .replan_step_s = 1.9,
               .act = Act::kRebalance,
               .event_kind = "rebalanced",
               .event_text = absl::StrCat(
                   "node n1 after straggler: ", kSummary,
                   "; at 0.50x speed the planner predicts 1.900 s/step with "
                   "tp=1 pp=2 dp=1 layers [5,3], against 2.000 s/step as it "
                   "runs; ",
                   kWorth),
               .reason = absl::StrCat("straggler: ", kSummary,
                                      " (re-planned with node n1 at its "
                                      "measured speed)"),
               .planner_calls = 1});
  c.push_back({.name = "rebalance_planner_error_is_the_refusal",
               .action = FaultPolicy::rebalance,
               .replan_step_s = -1,
               .event_kind = "fault_action",
               .event_text = "report after straggler (rebalance refused: "
                             "tp=3 does not divide 4 ranks)",
               .planner_calls = 1});
  c.push_back({.name = "rebalance_not_worth_it_does_not_plan",
               .action = FaultPolicy::rebalance,
               .latest = 999,
               .event_kind = "fault_action",
               .event_text =
                   "report after straggler (policy rebalance not applied: "
                   "predicted loss 0.5 s (1 remaining steps x 1.000 s x (1 - "
                   "1/2.00)) vs restart cost 30.0 s (fault.restart_cost_s))"});
  return c;
}

class DecideTest : public ::testing::TestWithParam<Case> {};

TEST_P(DecideTest, Decides) {
  const Case& t = GetParam();
  FaultCase c{.kind = t.kind,
              .slowdown = t.slowdown,
              .assessed = {.action = t.action,
                           .summary = kSummary,
                           .node = t.node,
                           .slows_job = true},
              .nodes = t.nodes,
              .launch_nodes = t.launch_nodes,
              .launch_min_nodes = t.launch_min_nodes,
              .has_model = t.has_model,
              .node_speed = 1.0,
              .plan_step_s = 1.0};
  FaultCosts costs{.total_steps = t.total,
                   .latest_step = t.latest,
                   .median_step_s = 1.0,
                   .measured_restart_s = t.measured_restart_s,
                   .policy_restart_s = 30};
  int calls = 0;
  auto predict = [&](const std::string& node,
                     double speed) -> StatusOr<ReplanPrediction> {
    ++calls;
    EXPECT_EQ(node, "n1");
    EXPECT_DOUBLE_EQ(speed, 0.5);
    if (t.replan_step_s < 0) {
      return absl::InvalidArgumentError("tp=3 does not divide 4 ranks");
    }
    return ReplanPrediction{.step_s = t.replan_step_s,
                            .tp = 1,
                            .pp = 2,
                            .dp = 1,
                            .layers_per_stage = {5, 3}};
  };
  const FaultDecision d = DecideFault(c, costs, predict);
  EXPECT_EQ(d.act, t.act);
  EXPECT_EQ(d.event_kind, t.event_kind);
  EXPECT_EQ(d.event_text, t.event_text);
  EXPECT_EQ(d.reason, t.reason);
  EXPECT_EQ(calls, t.planner_calls);
  if (t.act == Act::kEvict || t.act == Act::kRebalance) {
    EXPECT_EQ(d.node, "n1");
  }
  if (t.act == Act::kRebalance) EXPECT_DOUBLE_EQ(d.node_speed, 0.5);
}

INSTANTIATE_TEST_SUITE_P(Table, DecideTest, ::testing::ValuesIn(Cases()),
                         [](const auto& info) { return info.param.name; });

TEST(AssessTest, PolicyPerKindAndTheNodeActedOn) {
  fault::ResolvedPolicy policy;
  policy.straggler = FaultPolicy::evict;
  policy.slow_link = FaultPolicy::restart;
  fault::FaultEvent e{.kind = fault::EventKind::kUnbalancedPlan,
                      .step = 40,
                      .node = "n2",
                      .stage = 1,
                      .slowdown = 1.5};
  FaultAssessment a = Assess(e, policy, std::nullopt);
  EXPECT_EQ(a.action, FaultPolicy::report);
  EXPECT_FALSE(a.slows_job);
  EXPECT_EQ(a.summary,
            "stages differ 1.50x as the plan predicted, found at step 40");

  e.kind = fault::EventKind::kPlanMismatch;
  a = Assess(e, policy, std::nullopt);
  EXPECT_EQ(a.action, FaultPolicy::evict);
  EXPECT_TRUE(a.slows_job);
  EXPECT_EQ(a.node, "n2");
  EXPECT_EQ(a.summary,
            "stage 1 on n2 computes 1.50x slower than planned relative to the "
            "other stages, found at step 40");

  e.kind = fault::EventKind::kSlowLink;
  e.peer_node = "n3";
  a = Assess(e, policy, std::string("n3"));
  EXPECT_EQ(a.action, FaultPolicy::restart);
  EXPECT_EQ(a.node, "n3");  // the node every slow pair shares
  EXPECT_EQ(a.summary,
            "link n2 -> n3 sends 1.50x slower than its reference, found at "
            "step 40");
  EXPECT_EQ(Assess(e, policy, std::nullopt).node, "");

  e.kind = fault::EventKind::kStraggler;
  e.rank = 5;
  e.section = "forward";
  a = Assess(e, policy, std::nullopt);
  EXPECT_EQ(a.action, FaultPolicy::evict);
  EXPECT_EQ(a.summary,
            "rank 5 on n2 is 1.50x slower (forward), confirmed at step 40");

  // Arrivals only from the ranks' own reported waits (torch's collectives,
  // no flight recorder): one rank could forge them, so reported only.
  e.self_reported = true;
  a = Assess(e, policy, std::nullopt);
  EXPECT_EQ(a.action, FaultPolicy::report);
  EXPECT_NE(a.summary.find("reported only, policy evict not applied"),
            std::string::npos)
      << a.summary;
}

}  // namespace
}  // namespace strata::coordinator
