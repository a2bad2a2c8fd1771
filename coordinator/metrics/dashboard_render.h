// The JSON the coordinator's dashboard page polls (`/api/dashboard.json`,
// docs/observe.md "Dashboard"): rendered on the event loop from what the
// coordinator already answers to `strata status`, `diagnose`, `events` and
// `workers`, so the page shows the CLI's numbers. Pure.
//
// {"now_ms", "jobs": [{id, name, state, attempt, restarts, message,
//   progress: {step, total, percent, tokens_per_s, step_s, mfu, eta_s,
//   ettr, checkpoint_step, text}, goodput: {wall_s, ratio, productive_s,
//   lost: {cause: s}}, plan: {tp, pp, dp, cp, layers, nodes}}],
//  "detail": {job: {curve: [[step, loss|null, tokens_per_s]],
//   heatmap: {steps, ranks, compute, wait, flagged}, events: [{ms, kind,
//   rank, message}], placement: [{rank, node, tp, pp, dp}]}},
//  "workers": [{id, node, alive, address, heartbeat_age_s, holds,
//   clock_offset_ms, clock_error_ms}]}
// Sizes are bounded: curves at most kCurvePoints points, heat maps at most
// kHeatmapRanks ranks (flagged ones first) x kHeatmapSteps steps, the last
// kEvents events of a job.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "proto/control.pb.h"

namespace strata::coordinator {

struct DashboardJob {
  control::DiagnoseReply diagnose;        // with history
  std::vector<control::StepReport> curve;  // one rank's, by step
  std::vector<control::Event> events;
};

struct DashboardInput {
  control::JobsReply jobs;            // with each job's latest steps
  control::ListWorkersReply workers;
  std::map<std::string, DashboardJob> detail;  // by job id
  int64_t now_unix_ms = 0;
};

inline constexpr int kDashboardCurvePoints = 400;
inline constexpr int kDashboardHeatmapRanks = 64;
inline constexpr int kDashboardHeatmapSteps = 120;
inline constexpr int kDashboardEvents = 100;

std::string RenderDashboardJson(const DashboardInput& in);

}  // namespace strata::coordinator
